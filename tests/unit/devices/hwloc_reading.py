"""What hwloc (lstopo) says about a snapshot's PCI devices, parsed from the
expected-output files that ship with the snapshots (.xml or .console).

For each PCI function: its ids, the cpuset of the object hwloc attached its
host bridge to (its locality), and the names of its block and network OS
devices."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from agent.cpuset import CPUSet


@dataclass(frozen=True)
class HwlocPCI:
    busid: str
    class4: str  # "0108"
    vendor: str
    device: str
    subvendor: str | None  # None: not printed (console)
    subdevice: str | None
    revision: str | None
    locality: CPUSet | None  # None: could not tell (console without a cpuset map)
    locality_object: str  # "Package P#1", "Machine", ...
    block: frozenset[str]
    net: frozenset[str]


def hwloc_mask(text: str) -> CPUSet:
    """hwloc writes "0x00000055,0x55555555" (0x on every 32-bit word)."""
    return CPUSet.from_mask(",".join(w.strip().removeprefix("0x") for w in text.split(",")))


def from_xml(path: Path) -> list[HwlocPCI]:
    out: list[HwlocPCI] = []

    def walk(el: ET.Element, cpuset: CPUSet | None, owner: str) -> None:
        t = el.get("type", "")
        if el.get("cpuset") is not None:
            cpuset = hwloc_mask(el.get("complete_cpuset") or el.get("cpuset"))
            owner = f"{t} P#{el.get('os_index', '?')}"
        if el.get("pci_busid") and el.get("pci_type"):
            m = re.match(r"(\w{4}) \[(\w{4}):(\w{4})\] \[(\w{4}):(\w{4})\] (\w{2})", el.get("pci_type"))
            assert m, el.get("pci_type")
            osdevs = [c for c in el if c.tag == "object" and c.get("type") == "OSDev"]
            out.append(HwlocPCI(
                el.get("pci_busid"), m[1], m[2], m[3], m[4], m[5], m[6], cpuset, owner,
                frozenset(c.get("name") for c in osdevs if c.get("osdev_type") == "1"),
                frozenset(c.get("name") for c in osdevs if c.get("osdev_type") == "16"),
            ))
        for c in el:
            if c.tag == "object":
                walk(c, cpuset, owner)

    walk(ET.parse(path).getroot(), None, "")
    return out


_CONSOLE_PCI = re.compile(r"^(\s*)(?:PCI|PCIBridge) L#\d+ \(busid=(\S+) id=(\w{4}):(\w{4}) class=(\w{4})")
_CONSOLE_OBJ = re.compile(r"^(\s*)(Machine|Package|Group\d*|Die|NUMANode) (?:L#\d+ )?\((?:P#(\d+))?")
_CONSOLE_OSDEV = re.compile(r'^(\s*)OSDev\[(\w+)\].*"([^"]+)"\s*$')


def from_console(path: Path, package_cpus: dict[int, CPUSet], all_cpus: CPUSet) -> list[HwlocPCI]:
    """Console output has no cpusets; the locality object (Machine or Package)
    is mapped to cpus with the snapshot's own package ids."""
    out: list[dict] = []
    stack: list[tuple[int, str, CPUSet | None]] = []  # (indent, object, cpuset) of locality objects
    current: dict | None = None
    for line in path.read_text().splitlines():
        indent = len(line) - len(line.lstrip())
        if m := _CONSOLE_OBJ.match(line):
            while stack and stack[-1][0] >= indent:
                stack.pop()
            kind, pid = m[2], m[3]
            cpus = all_cpus if kind == "Machine" else package_cpus.get(int(pid)) if kind == "Package" and pid else None
            if kind != "NUMANode":  # I/O hangs off normal objects, never NUMA nodes (hwloc 2.x)
                stack.append((indent, f"{kind} P#{pid}" if pid else kind, cpus))
            continue
        if m := _CONSOLE_PCI.match(line):
            while stack and stack[-1][0] >= indent:
                stack.pop()
            owner, cpus = (stack[-1][1], stack[-1][2]) if stack else ("Machine", all_cpus)
            current = {"indent": indent, "busid": m[2], "vendor": m[3], "device": m[4], "class4": m[5],
                       "owner": owner, "cpus": cpus, "block": set(), "net": set()}
            out.append(current)
            continue
        if (m := _CONSOLE_OSDEV.match(line)) and current and indent > current["indent"]:
            if m[2] in ("Storage", "Block"):
                current["block"].add(m[3])
            elif m[2] in ("Network", "Net"):
                current["net"].add(m[3])
    return [HwlocPCI(d["busid"], d["class4"], d["vendor"], d["device"], None, None, None, d["cpus"], d["owner"],
                     frozenset(d["block"]), frozenset(d["net"])) for d in out]


def pci_locality_overrides(test_file: Path) -> list[tuple[str, int, int, CPUSet]]:
    """HWLOC_PCI_LOCALITY from a snapshot's .test env lines: (domain, first bus,
    last bus, cpus). hwloc then ignores the kernel's local_cpus for those buses."""
    text = test_file.read_text()
    m = re.search(r'HWLOC_PCI_LOCALITY="([^"]*)"', text)
    if not m:
        return []
    out = []
    for entry in m[1].split(";"):
        entry = entry.strip()
        if not entry or entry.startswith("#"):
            continue
        where, mask = entry.split()
        dom, _, buses = where.partition(":")
        lo, _, hi = buses.partition("-")
        out.append((dom, int(lo, 16), int(hi or lo, 16), hwloc_mask(mask)))
    return out
