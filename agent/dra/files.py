"""DeviceClasses and ResourceClaims as files in ``<root>/dra/`` (standalone
mode, and kubelet mode without an API server).

Every ``*.yaml``/``*.yml``/``*.json`` in the directory is read (YAML files may
hold several documents); a ResourceClaim must be the only document of its
file, because hwagent writes the claim's allocation back into that file
(atomically: temp file, fsync, rename, fsync dir). Files are opened without
following links (``agent.safepath``) and refused above ``MAX_FILE_BYTES``; a
malformed file, a duplicate name or an unknown kind is a ``ClaimError`` that
names the file, and nothing is allocated until it is fixed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.dra.cel import check
from agent.dra.claims import ClaimError, DeviceClass, ResourceClaim, allocation_status, parse_claim, \
    parse_device_class
from agent.dra.claims import AllocatedDevice
from agent.safepath import open_dir, open_file
from agent.statefile import write_atomic

__all__ = ["DRA_DIR", "MAX_FILE_BYTES", "DraFiles", "ClaimFiles"]

DRA_DIR = "dra"
MAX_FILE_BYTES = 1 << 20
_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class DraFiles:
    classes: Mapping[str, DeviceClass]
    #: (namespace, name) -> claim
    claims: Mapping[tuple[str, str], ResourceClaim]
    #: (namespace, name) -> the file holding the claim
    claim_files: Mapping[tuple[str, str], str]


def _documents(name: str, data: bytes) -> list[Any]:
    try:
        if name.endswith(".json"):
            return [json.loads(data)]
        import yaml

        return [d for d in yaml.safe_load_all(data) if d is not None]
    except Exception as e:  # noqa: BLE001 - JSON and YAML errors alike: the file is malformed
        raise ClaimError(f"{name} is not valid {'JSON' if name.endswith('.json') else 'YAML'}: {e}") from None


class ClaimFiles:
    """The ``dra`` directory under a root dir: read it whole, write one claim's status."""

    def __init__(self, root_dir: str | os.PathLike[str]) -> None:
        self.root = Path(root_dir)
        self.dir = self.root / DRA_DIR
        self._cache: tuple[tuple[object, ...], DraFiles] | None = None

    def _signature(self) -> tuple[object, ...]:
        """What changes when any claim or class file does: each file's name, inode, size and mtime
        (an atomic replace is a new inode; an edit in place a new mtime, fine-grained once read)."""
        try:
            dfd = open_dir(self.root, DRA_DIR, tighten=False)
        except FileNotFoundError:
            return ()
        try:
            out = []
            for n in sorted(os.listdir(dfd)):
                if n.endswith(_SUFFIXES) and not n.startswith("."):
                    st = os.stat(n, dir_fd=dfd, follow_symlinks=False)
                    out.append((n, st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode))
            return tuple(out)
        finally:
            os.close(dfd)

    def current(self) -> DraFiles:
        """``load()``, answered from the last reading while no file in the directory changed (a
        listing and a stat per file instead of reading, parsing and compiling every claim): what
        the views (ps, describe, pod-resources) ask on every call. Errors are ``load()``'s."""
        sig = self._signature()
        cached = self._cache
        if cached is not None and cached[0] == sig:
            return cached[1]
        files = self.load()
        self._cache = (sig, files)
        return files

    def _read(self, dfd: int, name: str) -> bytes:
        """The file's bytes; a file others may read (an operator's umask) is narrowed to its
        owner's first: claims name pods and their devices (issue 32 item 7)."""
        fd = open_file(dfd, name, os.O_RDONLY, where=self.dir, root=self.root)
        try:
            st = os.fstat(fd)
            if st.st_mode & 0o077:
                os.fchmod(fd, st.st_mode & 0o600)
            if st.st_size > MAX_FILE_BYTES:
                raise ClaimError(f"{self.dir / name} is larger than {MAX_FILE_BYTES} bytes")
            data = os.read(fd, MAX_FILE_BYTES + 1)
        finally:
            os.close(fd)
        if len(data) > MAX_FILE_BYTES:
            raise ClaimError(f"{self.dir / name} is larger than {MAX_FILE_BYTES} bytes")
        return data

    def load(self) -> DraFiles:
        """Every class and claim in the directory (none when it does not exist)."""
        classes: dict[str, DeviceClass] = {}
        claims: dict[tuple[str, str], ResourceClaim] = {}
        where: dict[tuple[str, str], str] = {}
        class_where: dict[str, str] = {}
        try:
            dfd = open_dir(self.root, DRA_DIR, tighten=False)
        except FileNotFoundError:
            return DraFiles({}, {}, {})
        try:
            names = sorted(n for n in os.listdir(dfd) if n.endswith(_SUFFIXES) and not n.startswith("."))
            for name in names:
                docs = _documents(name, self._read(dfd, name))
                for doc in docs:
                    kind = doc.get("kind") if isinstance(doc, dict) else None
                    try:
                        if kind == "DeviceClass":
                            c = parse_device_class(doc)
                            for e in c.selectors:
                                check(e)
                            if c.name in classes:
                                raise ClaimError(f"DeviceClass {c.name} is defined in {class_where[c.name]} too")
                            classes[c.name], class_where[c.name] = c, name
                        elif kind == "ResourceClaim":
                            if len(docs) != 1:
                                raise ClaimError("a ResourceClaim must be the only document of its file "
                                                 "(hwagent writes its allocation back into it)")
                            claim = parse_claim(doc)
                            for r in claim.requests:
                                for e in r.selectors:
                                    check(e)
                            key = (claim.namespace, claim.name)
                            if key in claims:
                                raise ClaimError(f"ResourceClaim {key[0]}/{key[1]} is defined in {where[key]} too")
                            claims[key], where[key] = claim, name
                        else:
                            raise ClaimError(f"kind {kind!r} is not DeviceClass or ResourceClaim")
                    except ClaimError as e:
                        raise ClaimError(f"{self.dir / name}: {e}") from None
        finally:
            os.close(dfd)
        return DraFiles(classes, claims, where)

    def write_allocation(self, files: DraFiles, claim: ResourceClaim,
                         results: tuple[AllocatedDevice, ...] | None,
                         reserved_for: tuple[tuple[str, str], ...] | None = None) -> None:
        """Replace the claim's file with its document and ``status.allocation`` = ``results``
        (None: deallocated), durably; the directory is walked without following links."""
        name = files.claim_files[(claim.namespace, claim.name)]
        doc = allocation_status(claim, results, reserved_for)
        if name.endswith(".json"):
            payload = json.dumps(doc, indent=2).encode() + b"\n"
        else:
            import yaml

            payload = yaml.safe_dump(doc, sort_keys=False).encode()
        os.close(open_dir(self.root, DRA_DIR, tighten=False))  # refuses a linked dra/ before writing through it
        write_atomic(self.dir / name, payload, mode=0o600)  # root's: claims name pods (issue 32 item 7)
