"""PCI vendor, device and class names from the system's ``pci.ids``.

``hwagent devices`` and the topology picture print "Mellanox ConnectX-6"
rather than "15b3:101b": the names come from the pci.ids database that
Debian ships as the ``pci.ids`` package (``/usr/share/misc/pci.ids``) and
Red Hat as ``hwdata`` (``/usr/share/hwdata/pci.ids``). It is optional at run
time: without it every name is None and the views print the hex ids.

The file is 1.3 MB; it is indexed by vendor with one scan and only the
vendors asked about are parsed, so a lookup costs milliseconds, not the full
parse. The format (see the file's header): a vendor line ``vvvv  Name``,
its devices indented by one tab ``\\tdddd  Name``, subsystems by two tabs,
and after the vendors the class list ``C cc  Name`` / ``\\tss  Name`` /
``\\t\\tpp  Name``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["PCI_IDS_PATHS", "PciNames", "load"]

#: where distributions put the database, most common first; $HWAGENT_PCI_IDS wins
PCI_IDS_PATHS = ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids", "/usr/share/pci.ids")

_VENDOR = re.compile(r"^([0-9a-f]{4})  (.+)$", re.MULTILINE)


@dataclass
class PciNames:
    """Lookups in one pci.ids text; an empty text answers None to everything."""

    text: str = ""
    path: str | None = None
    _vendors: dict[str, tuple[str, int, int]] | None = field(default=None, repr=False)
    _devices: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    _classes: dict[str, str] | None = field(default=None, repr=False)

    def _vendor_index(self) -> dict[str, tuple[str, int, int]]:
        if self._vendors is None:
            end_of_vendors = self.text.find("\nC ")
            body = self.text if end_of_vendors < 0 else self.text[:end_of_vendors]
            starts = [(m.group(1), m.group(2).strip(), m.end()) for m in _VENDOR.finditer(body)]
            index: dict[str, tuple[str, int, int]] = {}
            for i, (vid, name, start) in enumerate(starts):
                stop = starts[i + 1][2] if i + 1 < len(starts) else len(body)
                index.setdefault(vid, (name, start, stop))
            self._vendors = index
        return self._vendors

    def vendor(self, vendor_id: str) -> str | None:
        found = self._vendor_index().get(vendor_id.lower().removeprefix("0x"))
        return found[0] if found else None

    def device(self, vendor_id: str, device_id: str) -> str | None:
        vid = vendor_id.lower().removeprefix("0x")
        devices = self._devices.get(vid)
        if devices is None:
            found = self._vendor_index().get(vid)
            devices = {}
            if found:
                for line in self.text[found[1] : found[2]].splitlines():
                    if line.startswith("\t") and not line.startswith("\t\t") and len(line) > 7 and line[5:7] == "  ":
                        devices.setdefault(line[1:5], line[7:].strip())
            self._devices[vid] = devices
        return devices.get(device_id.lower().removeprefix("0x"))

    def _class_index(self) -> dict[str, str]:
        if self._classes is None:
            classes: dict[str, str] = {}
            start = self.text.find("\nC ")
            cls = sub = None
            for line in self.text[start + 1 :].splitlines() if start >= 0 else ():
                if line.startswith("C ") and len(line) > 6:
                    cls, sub = line[2:4], None
                    classes[cls] = line[6:].strip()
                elif cls and line.startswith("\t\t") and len(line) > 6:
                    if sub:
                        classes[cls + sub + line[2:4]] = line[6:].strip()
                elif cls and line.startswith("\t") and len(line) > 5:
                    sub = line[1:3]
                    classes[cls + sub] = line[5:].strip()
            self._classes = classes
        return self._classes

    def class_name(self, class_code: str) -> str | None:
        """The most specific name for a 6-digit class code ("010802" -> "NVM Express")."""
        code = class_code.lower().removeprefix("0x")
        idx = self._class_index()
        for n in (6, 4, 2):
            name = idx.get(code[:n])
            if name:
                return name
        return None

    def describe(self, vendor_id: str, device_id: str) -> str | None:
        """ "Vendor Device", shortened the way lspci is read: None when neither is known."""
        v, d = self.vendor(vendor_id), self.device(vendor_id, device_id)
        if v and d:
            return f"{_short_vendor(v)} {d}"
        return d or v


def _short_vendor(name: str) -> str:
    """ "Intel Corporation" -> "Intel", "Mellanox Technologies" -> "Mellanox"; brackets kept if given."""
    m = re.search(r"\[([^\]]+)\]", name)
    if m:
        return m.group(1)
    for suffix in (" Corporation", " Corp.", " Technologies", " Technology", " Inc.", " Co., Ltd.", " Ltd.", ", Inc."):
        name = name.replace(suffix, "")
    return name.strip(" ,")


@lru_cache(maxsize=4)
def _load_path(path: str) -> PciNames:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return PciNames(f.read(), path)
    except OSError:
        return PciNames()


def load(path: str | None = None) -> PciNames:
    """The system's database (or ``path``); an empty one when none is installed."""
    candidates = [path] if path else [p for p in (os.environ.get("HWAGENT_PCI_IDS"), *PCI_IDS_PATHS) if p]
    for p in candidates:
        if os.path.isfile(p):
            return _load_path(p)
    return PciNames()
