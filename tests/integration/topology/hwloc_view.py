"""hwloc's reading of a machine, parsed from its own output files.

The hwloc test-suite stores, beside each sysfs snapshot, what ``lstopo`` printed
for it: either ``lstopo -v`` console text or ``lstopo --of xml``. Both are
reduced here to the same small ``HwlocView`` (PUs, packages, cores, NUMA nodes,
caches, NUMA latencies, all by OS index) so that one comparison works for both,
and so that a live ``lstopo-no-graphics --of xml`` can be compared the same way.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from agent.cpuset import CPUSet

__all__ = ["HwlocCache", "HwlocNode", "HwlocView", "SnapshotTest", "parse_console", "parse_test", "parse_xml"]

_UNITS = {"": 1, "B": 1, "KB": 1 << 10, "KIB": 1 << 10, "MB": 1 << 20, "MIB": 1 << 20, "GB": 1 << 30, "GIB": 1 << 30, "TB": 1 << 40, "TIB": 1 << 40}


@dataclass(frozen=True)
class HwlocNode:
    os_index: int
    cpus: CPUSet  # the CPUs of the object the node is attached to (its locality)
    local_bytes: int | None
    #: resolution of local_bytes: console text is rounded to whole units
    unit_bytes: int = 1


@dataclass(frozen=True)
class HwlocCache:
    level: int
    kind: str  # "Unified", "Data", "Instruction" (sysfs's words)
    cpus: CPUSet


@dataclass
class HwlocView:
    pus: CPUSet = field(default_factory=CPUSet)
    packages: list[CPUSet] = field(default_factory=list)
    cores: list[CPUSet] = field(default_factory=list)
    nodes: dict[int, HwlocNode] = field(default_factory=dict)
    caches: list[HwlocCache] = field(default_factory=list)
    #: (os index, os index) -> latency, where hwloc printed a NUMALatency matrix
    distances: dict[tuple[int, int], int] = field(default_factory=dict)
    #: object counts hwloc itself printed ("depth 1: 8 Package"), console only
    declared: dict[str, int] = field(default_factory=dict)

    def consistent_with_declared_counts(self) -> bool:
        """The parse found as many packages/cores/PUs/nodes as hwloc says it printed."""
        found = {"Package": len(self.packages), "Core": len(self.cores), "PU": len(self.pus), "NUMANode": len(self.nodes)}
        return all(found[k] == v for k, v in self.declared.items() if k in found)

    def last_level_caches(self) -> set[CPUSet]:
        """CPU sets of the highest-level CPU-side data/unified caches (MemCache excluded)."""
        usable = [c for c in self.caches if c.kind != "Instruction"]
        if not usable:
            return set()
        top = max(c.level for c in usable)
        return {c.cpus for c in usable if c.level == top}

    def nodes_of_pu(self, pu: int) -> set[int]:
        return {n.os_index for n in self.nodes.values() if pu in n.cpus}


def _cache_kind(type_name: str) -> tuple[int, str] | None:
    m = re.fullmatch(r"L(\d)([diu]?)Cache", type_name)
    if m is None:
        return None
    return int(m.group(1)), {"d": "Data", "i": "Instruction", "u": "Unified", "": "Unified"}[m.group(2)]


# -- console ------------------------------------------------------------------------
_LINE = re.compile(r"^(?P<indent> *)(?P<type>[A-Za-z][A-Za-z0-9]*)(?:\([^)]*\))?(?: L#(?P<logical>\d+))?(?: \((?P<attrs>.*)\))?")
_ATTR_P = re.compile(r"(?:^| )P#(\d+)")
_DEPTH = re.compile(r"^\s*(?:Special )?depth -?\d+:\s+(\d+) (\w+) \(type")
_LOCAL = re.compile(r"(?:^| )local=(\d+)([A-Za-z]*)")


@dataclass
class _Obj:
    type: str
    attrs: str
    logical: int | None = None
    children: list[_Obj] = field(default_factory=list)
    parent: _Obj | None = None

    @property
    def os_index(self) -> int | None:
        m = _ATTR_P.search(self.attrs)
        return int(m.group(1)) if m else None


def parse_console(text: str) -> HwlocView:
    """``lstopo -v`` text: the tree (indented two spaces a level) and the latency matrix."""
    lines = text.splitlines()
    root: _Obj | None = None
    stack: list[tuple[int, _Obj]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("depth ") or line.startswith("Special depth"):
            break
        m = _LINE.match(line)
        i += 1
        if m is None:
            continue
        logical = m.group("logical")
        obj = _Obj(m.group("type"), m.group("attrs") or "", int(logical) if logical else None)
        depth = len(m.group("indent"))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            obj.parent = stack[-1][1]
            obj.parent.children.append(obj)
        else:
            root = obj
        stack.append((depth, obj))
    if root is None:
        raise ValueError("no lstopo tree found")
    view = HwlocView()
    _fill_from_tree(root, view)
    view.distances = _console_latencies(lines[i:], root)
    for line in lines[i:]:
        m = _DEPTH.match(line)
        if m:
            view.declared[m.group(2)] = int(m.group(1))
    return view


def _pus_below(obj: _Obj, memo: dict[int, CPUSet]) -> CPUSet:
    key = id(obj)
    if key not in memo:
        if obj.type == "PU":
            memo[key] = CPUSet([obj.os_index or 0])
        else:
            memo[key] = CPUSet.union_all(_pus_below(c, memo) for c in obj.children)
    return memo[key]


def _fill_from_tree(root: _Obj, view: HwlocView) -> None:
    memo: dict[int, CPUSet] = {}
    todo = [root]
    while todo:
        obj = todo.pop()
        todo.extend(obj.children)
        if obj.type == "PU":
            continue
        cpus = _pus_below(obj, memo)
        if obj.type == "Package":
            view.packages.append(cpus)
        elif obj.type == "Core":
            view.cores.append(cpus)
        elif obj.type == "NUMANode":
            # memory objects hang off the object whose CPUs are local to them,
            # possibly through memory-side caches
            anchor = obj.parent
            while anchor is not None and anchor.type in ("MemCache", "NUMANode"):
                anchor = anchor.parent
            m = _LOCAL.search(obj.attrs)
            size = unit = None
            if m:
                unit = _UNITS[m.group(2).upper()]
                size = int(m.group(1)) * unit
            idx = obj.os_index
            assert idx is not None, obj.attrs
            view.nodes[idx] = HwlocNode(idx, _pus_below(anchor, memo) if anchor else CPUSet(), size, unit or 1)
        elif (ck := _cache_kind(obj.type)) is not None:
            view.caches.append(HwlocCache(ck[0], ck[1], cpus))
    view.pus = _pus_below(root, memo)


def _console_latencies(lines: list[str], root: _Obj) -> dict[tuple[int, int], int]:
    """The NUMALatency matrix, printed by logical index; mapped to OS indexes."""
    logical_to_os: dict[int, int] = {}
    todo = [root]
    while todo:
        obj = todo.pop()
        todo.extend(obj.children)
        if obj.type == "NUMANode" and obj.logical is not None and obj.os_index is not None:
            logical_to_os[obj.logical] = obj.os_index
    out: dict[tuple[int, int], int] = {}
    for k, line in enumerate(lines):
        if line.startswith("Relative latency matrix") and "NUMANodes" in line and "logical indexes" in line:
            header = lines[k + 1].split()
            assert header[0] == "index", header
            cols = [int(x) for x in header[1:]]
            for row in lines[k + 2 : k + 2 + len(cols)]:
                vals = [int(x) for x in row.split()]
                for col, v in zip(cols, vals[1:], strict=True):
                    out[(logical_to_os[vals[0]], logical_to_os[col])] = v
            break
    return out


# -- XML ----------------------------------------------------------------------------
def _xml_cpuset(text: str | None) -> CPUSet:
    if not text:
        return CPUSet()
    # hwloc prints 32-bit words, "0x"-prefixed, an empty word for a zero one,
    # and "0xf...f" first for an infinitely set bitmap
    words = [w.strip().removeprefix("0x") or "0" for w in text.split(",")]
    words = [w for w in words if w != "f...f"]
    return CPUSet.from_mask(",".join(words)) if words else CPUSet()


def parse_xml(text: str) -> HwlocView:
    """``lstopo --of xml`` (hwloc 2.x format)."""
    top = ET.fromstring(text)
    view = HwlocView()
    pus: list[int] = []

    def walk(el: ET.Element) -> None:
        for obj in el.findall("object"):
            t = obj.get("type", "")
            cpus = _xml_cpuset(obj.get("cpuset"))
            if t == "PU":
                pus.append(int(obj.get("os_index", "0")))
            elif t == "Package":
                view.packages.append(cpus)
            elif t == "Core":
                view.cores.append(cpus)
            elif t == "NUMANode":
                idx = int(obj.get("os_index", "0"))
                mem = obj.get("local_memory")
                view.nodes[idx] = HwlocNode(idx, cpus, int(mem) if mem else None)
            elif (ck := _cache_kind(t)) is not None:
                kind = {"0": "Unified", "1": "Data", "2": "Instruction"}.get(obj.get("cache_type", "0"), ck[1])
                view.caches.append(HwlocCache(ck[0], kind, cpus))
            walk(obj)

    walk(top)
    view.pus = CPUSet(pus)
    for d in top.iter("distances2"):
        if d.get("type") != "NUMANode" or d.get("name") not in (None, "NUMALatency"):
            continue
        ids = [int(x) for el in d.findall("indexes") for x in (el.text or "").split()]
        values = [int(x) for v in d.findall("u64values") for x in (v.text or "").split()]
        n = len(ids)
        for a in range(n):
            for b in range(n):
                view.distances[(ids[a], ids[b])] = values[a * n + b]
    return view


# -- the .test files ------------------------------------------------------------------
@dataclass(frozen=True)
class SnapshotTest:
    """One hwloc test case: which file holds hwloc's reading, with what options/env."""

    name: str
    comment: str
    target: Path
    options: str
    env: tuple[str, ...]

    def view(self) -> HwlocView:
        text = self.target.read_text()
        return parse_xml(text) if self.target.suffix == ".xml" else parse_console(text)


def parse_test(path: Path) -> SnapshotTest:
    comment: list[str] = []
    target = options = ""
    env: list[str] = []
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            comment.append(line.lstrip("# "))
            continue
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "target":
            target = value
        elif key == "options":
            options = value
        elif key == "env" and not value.startswith("export "):
            env.append(value)
    return SnapshotTest(path.stem, " ".join(comment), path.parent / target, options, tuple(env))
