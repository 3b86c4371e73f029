"""Read a ``Topology`` from a sysfs tree (the live ``/sys`` or a snapshot of one).

The kernel's files are the truth, but they vary by age and architecture:
``die_id`` arrived in 5.2, ``cluster_id`` in 5.16, ``core_cpus_list`` replaced
``thread_siblings_list`` in 5.4, s390 and some arm boards have no
``devices/system/node`` at all, ps3 has no package ids, firmware NUMA tables
can list a CPU in several nodes or in none. Each of these degrades to the
nearest honest answer plus one line in ``Topology.warnings``; only a root that
is not a sysfs at all is an error.

Each file is read at most once; per-CPU files that a sibling already answered
(thread siblings, cache sharing) are not read again, which keeps a 256-CPU
snapshot in the low milliseconds.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, replace

from agent.cpuset import CPUSet
from agent.topology.allowed import read_allowed
from agent.topology.cpuinfo import CpuinfoIds, parse_cpuinfo
from agent.topology.files import Notes, listdir_ids, parse_size
from agent.topology.model import CPU, Cache, NUMANode, Topology

__all__ = ["TopologyError", "read_topology"]

_NODE_MEMTOTAL = re.compile(r"^Node\s+\d+\s+MemTotal:\s+(\d+)\s*kB", re.MULTILINE)
_MEMTOTAL = re.compile(r"^MemTotal:\s+(\d+)\s*kB", re.MULTILINE)


class TopologyError(Exception):
    """The given root is not a sysfs tree (nothing can be read from it)."""


def read_topology(
    sysfs_root: str = "/sys",
    procfs_root: str = "/proc",
    *,
    self_cgroup: bool | None = None,
    log_warnings: bool = True,
) -> Topology:
    """Read CPUs, cores, caches and NUMA nodes under ``sysfs_root``.

    ``self_cgroup``: read the CPUs/memory nodes this process may use into
    ``allowed_cpus``/``allowed_mems``. ``None`` (default) does so only for the
    live roots ``/sys`` + ``/proc``, since a snapshot's ``proc/self`` describes
    another process; ``True`` reads them from ``procfs_root`` anyway (hwloc
    snapshots carry the gathering process's cpuset), ``False`` never.

    ``log_warnings``: also log each of ``Topology.warnings`` (the daemon's
    record). ``hwagent topology`` prints them in its output and passes False:
    a second, bare copy on stderr said nothing more and loaded :mod:`logging`.
    """
    sysfs_root = os.fspath(sysfs_root)
    procfs_root = os.fspath(procfs_root)
    cpu_dir = os.path.join(sysfs_root, "devices", "system", "cpu")
    if not os.path.isdir(cpu_dir):
        raise TopologyError(f"{cpu_dir} is not a directory: is {sysfs_root!r} a sysfs root?")
    notes = Notes()
    sets = _read_cpu_sets(cpu_dir, notes)
    cpu_ids = sets.online
    cpuinfo = _CpuinfoLazy(procfs_root, notes)
    nodes, numa_of = _read_numa(sysfs_root, procfs_root, cpu_ids, notes)
    names = _topology_names(cpu_dir, cpu_ids)
    known: dict[str, dict[int, CPUSet]] = {}
    cpus = _resolve_packages(
        [_read_cpu(cpu_dir, c, numa_of.get(c), cpuinfo, names, known, notes) for c in cpu_ids], notes
    )
    caches = _read_caches(cpu_dir, {c.id: c.thread_siblings for c in cpus}, notes)

    if self_cgroup is None:
        self_cgroup = _is_live(sysfs_root, procfs_root)
    allowed_cpus = allowed_mems = None
    if self_cgroup:
        fs_root = "/" if _is_live(sysfs_root, procfs_root) else os.path.dirname(os.path.abspath(procfs_root))
        allowed_cpus, allowed_mems = read_allowed(procfs_root, fs_root, notes)

    return Topology(
        cpus=cpus,
        numa_nodes=nodes,
        caches=caches,
        possible=sets.possible,
        present=sets.present,
        offline=sets.offline,
        isolated=sets.isolated,
        allowed_cpus=allowed_cpus,
        allowed_mems=allowed_mems,
        warnings=notes.finish(log=log_warnings),
        source=sysfs_root,
    )


def _is_live(sysfs_root: str, procfs_root: str) -> bool:
    return os.path.abspath(sysfs_root) == "/sys" and os.path.abspath(procfs_root) == "/proc"


# -- CPU sets -------------------------------------------------------------------
@dataclass(frozen=True)
class _CpuSets:
    online: CPUSet  # online CPUs whose cpuN directory exists (topology readable)
    possible: CPUSet
    present: CPUSet
    offline: CPUSet
    isolated: CPUSet


def _read_cpu_sets(cpu_dir: str, notes: Notes) -> _CpuSets:
    dirs = CPUSet(listdir_ids(cpu_dir, "cpu"))
    j = os.path.join
    online = notes.cpuset(j(cpu_dir, "online"))
    if online is None:
        online = _online_from_cpu_files(cpu_dir, dirs, notes)
    present = notes.cpuset(j(cpu_dir, "present")) or dirs
    possible = notes.cpuset(j(cpu_dir, "possible")) or (present | online)
    offline = notes.cpuset(j(cpu_dir, "offline"))
    if offline is None:
        offline = possible - online
    isolated = notes.cpuset(j(cpu_dir, "isolated")) or CPUSet()
    missing = online - dirs
    if missing:
        notes.warn(f"cpus {missing} are online but have no {cpu_dir}/cpuN directory; left out")
    if not online:
        notes.warn(f"no online cpu found under {cpu_dir}")
    return _CpuSets(online & dirs, possible, present, offline, isolated)


def _online_from_cpu_files(cpu_dir: str, dirs: CPUSet, notes: Notes) -> CPUSet:
    """The online CPUs of a kernel without ``cpu/online`` (before 2.6.2x): each CPU's own file.

    A CPU without ``cpuN/online`` cannot be unplugged (usually cpu0; on some
    machines others too, and a kernel without CPU hotplug has none at all)
    and is online; one whose file says ``0`` is offline. Which CPUs have the
    file differs per CPU, so every CPU's file is tried: no one CPU's stands
    for the rest (taking cpu1's absence to mean "no hotplug" once counted
    offline CPUs as online). hwloc reads the tree the same way.
    """
    return CPUSet(c for c in dirs if (notes.text(f"{cpu_dir}/cpu{c}/online") or "1").strip() != "0")


# -- per CPU ----------------------------------------------------------------------
class _CpuinfoLazy:
    """/proc/cpuinfo, parsed only if some CPU has no topology directory."""

    def __init__(self, procfs_root: str, notes: Notes) -> None:
        self._path = os.path.join(procfs_root, "cpuinfo")
        self._notes = notes
        self._ids: dict[int, CpuinfoIds] | None = None

    def _all(self) -> dict[int, CpuinfoIds]:
        if self._ids is None:
            text = self._notes.text(self._path, stream=True)
            self._ids = parse_cpuinfo(text) if text else {}
        return self._ids

    def get(self, cpu: int) -> CpuinfoIds | None:
        return self._all().get(cpu)

    def siblings(self, cpu: int) -> CPUSet:
        """The processors cpuinfo puts on the same (package, core) as ``cpu``."""
        ids = self._all()
        mine = ids.get(cpu)
        if mine is None or mine.core_id is None:
            return CPUSet([cpu])
        return CPUSet(c for c, v in ids.items() if v == mine)


#: per-CPU topology files, in order of preference where several answer the same question
_SIBLING_FILES = (
    ("core_cpus_list", "core_cpus"),  # 5.4+
    ("thread_siblings_list", "thread_siblings"),  # older name, same content
)
_PACKAGE_FILES = (
    ("package_cpus_list", "package_cpus"),  # 5.4+
    ("core_siblings_list", "core_siblings"),  # older name, same content
)
_DIE_FILES = (("die_cpus_list", "die_cpus"),)  # 5.10+
_CLUSTER_FILES = (("cluster_cpus_list", "cluster_cpus"),)  # 5.16+

#: package id placeholder until ``_resolve_packages`` decides
_UNKNOWN = -1

#: what the kernel prints for "no such id": -1 from the generic code, 65535
#: where an x86 id is derived from an unset u16 APIC field (cluster_id on
#: parts without L2 clusters), 0xffffffff from an unsigned -1
_SENTINELS = frozenset({-1, 0xFFFF, 0xFFFFFFFF})


def _absent(value: int | None) -> bool:
    return value is None or value < 0 or value in _SENTINELS


def _topology_names(cpu_dir: str, cpus: CPUSet) -> frozenset[str]:
    """File names in the first CPU's topology directory.

    Kernels expose the same files for every CPU, so files absent there are not
    tried first elsewhere; that saves several failed opens per CPU on old kernels.
    """
    for cpu in cpus:
        try:
            return frozenset(os.listdir(f"{cpu_dir}/cpu{cpu}/topology"))
        except OSError:
            continue
    return frozenset()


def _read_cpu(
    cpu_dir: str,
    cpu: int,
    numa: int | None,
    cpuinfo: _CpuinfoLazy,
    names: frozenset[str],
    known: dict[str, dict[int, CPUSet]],
    notes: Notes,
) -> tuple[CPU, CPUSet | None]:
    """The CPU (package id possibly ``_UNKNOWN``) and its package's CPU set if known.

    Ids shared by a whole CPU set (package, die, cluster) are read once per set,
    from its first CPU to reach here, and handed to the other members: the
    kernel derives those sets from the same ids, and on a 256-CPU machine the
    per-CPU reads were most of the topology files opened. ``core_id`` is read
    per CPU because it is what tells two cores in one sibling set apart.
    """
    topo = f"{cpu_dir}/cpu{cpu}/topology"

    def read_int(name: str) -> int | None:
        return notes.integer(f"{topo}/{name}") if name in names else None

    siblings = _shared_set(topo, cpu, _SIBLING_FILES, names, known.setdefault("core", {}), notes)
    if siblings is None and not os.path.isdir(topo):
        return _cpu_from_cpuinfo(cpu, numa, cpuinfo, notes), None
    if siblings is None:
        notes.cpu(cpu, "no usable thread sibling list; treated as a core of its own")
        siblings = CPUSet([cpu])
    package_cpus = _shared_set(topo, cpu, _PACKAGE_FILES, names, known.setdefault("package", {}), notes)
    package = _set_id(cpu, package_cpus, "physical_package_id", read_int, known)
    if package is None or _absent(package):
        package = _UNKNOWN  # s390, ps3, some arm boards
    core_id = read_int("core_id")
    if core_id is None or _absent(core_id):
        # ps3 and some embedded kernels: the sibling set is the only core
        # identity, so number the core by its first thread
        notes.cpu(cpu, "no core_id; core numbered by its first thread sibling")
        core_id = siblings.first()
    die = _grouping_id(topo, cpu, _DIE_FILES, "die_id", names, read_int, known, notes)
    if die is None:
        notes.cpu(cpu, "no die_id (kernel before 5.2 or not reported); assuming die 0")
        die = 0
    cluster = _grouping_id(topo, cpu, _CLUSTER_FILES, "cluster_id", names, read_int, known, notes)
    cpu_obj = CPU(
        id=cpu,
        package_id=package,
        core_id=core_id,
        die_id=die,
        cluster_id=cluster,
        numa_node=numa,
        thread_siblings=siblings,
    )
    return cpu_obj, package_cpus


def _grouping_id(
    topo: str,
    cpu: int,
    files: tuple[tuple[str, str], ...],
    id_name: str,
    names: frozenset[str],
    read_int,
    known: dict,
    notes: Notes,
) -> int | None:
    """A die or cluster id, None where the kernel has none.

    An architecture either reports the level or prints its "no value" id for
    every CPU (arm64 dies: -1; x86 clusters without L2 sharing: 65535), so
    after the first sentinel the other CPUs' files are not opened.
    """
    flags: set[str] = known.setdefault("_absent", set())
    if id_name in flags or id_name not in names:
        return None
    members = _shared_set(topo, cpu, files, names, known.setdefault(id_name + "_set", {}), notes) if files[0][0] in names else None
    value = _set_id(cpu, members, id_name, read_int, known)
    if _absent(value):
        flags.add(id_name)
        return None
    return value


def _set_id(cpu: int, members: CPUSet | None, name: str, read_int, known: dict) -> int | None:
    """The id file ``name`` for ``cpu``, read once for all ``members`` when they are known."""
    ids: dict[int, int | None] = known.setdefault(name, {})
    if cpu in ids:
        return ids[cpu]
    value = read_int(name)
    if members is not None and cpu in members:
        for other in members:
            ids.setdefault(other, value)
    return value


@functools.lru_cache(maxsize=32)
def _candidates(files: tuple[tuple[str, str], ...], names: frozenset[str]) -> tuple[tuple[str, bool], ...]:
    """(file, is_mask) to try in order: files the first CPU has come first, the others only if those fail."""
    out = [(name, bool(is_mask)) for pair in files for is_mask, name in enumerate(pair)]
    out.sort(key=lambda c: c[0] not in names)
    return tuple(out)


def _shared_set(
    topo: str,
    cpu: int,
    files: tuple[tuple[str, str], ...],
    names: frozenset[str],
    known: dict[int, CPUSet],
    notes: Notes,
) -> CPUSet | None:
    """A sibling-style set (core, package) for ``cpu``; read once per group of sharers."""
    found = known.get(cpu)
    if found is not None:
        return found
    found = notes.first_cpuset([(f"{topo}/{n}", m) for n, m in _candidates(files, names)], containing=cpu)
    if found is not None:
        for other in found:
            known.setdefault(other, found)
    return found


def _resolve_packages(raw: list[tuple[CPU, CPUSet | None]], notes: Notes) -> tuple[CPU, ...]:
    """Give every CPU a package id that agrees with the kernel's package CPU sets.

    ``physical_package_id`` is the identity when it is trustworthy. When it is
    missing or -1 (s390, ps3), the package CPU set (``package_cpus_list`` /
    ``core_siblings_list``) still groups CPUs, and each group gets the lowest
    unused id. When one id covers several disjoint package sets (old ia64
    kernels report 0 for every single-core socket), the sets win and all but
    the first get fresh ids. With neither, the whole machine is package 0.
    """
    used = {c.package_id for c, _ in raw if c.package_id != _UNKNOWN}
    by_id: dict[int, list[CPUSet]] = {}
    for c, pset in raw:
        if c.package_id != _UNKNOWN and pset is not None and pset not in by_id.setdefault(c.package_id, []):
            by_id[c.package_id].append(pset)
    assigned: dict[CPUSet, int] = {}
    for pid, psets in by_id.items():
        assigned[psets[0]] = pid
        if len(psets) > 1:
            notes.warn(
                f"cpus {CPUSet.union_all(psets)} all report physical_package_id {pid} but form "
                f"{len(psets)} separate packages in package_cpus/core_siblings; split into separate packages"
            )

    def fresh() -> int:
        n = 0
        while n in used:
            n += 1
        used.add(n)
        return n

    out = []
    for c, pset in sorted(raw, key=lambda r: r[0].id):
        pid = c.package_id
        if pset is not None:
            if pset not in assigned:
                assigned[pset] = fresh()
            if pid == _UNKNOWN:
                notes.cpu(c.id, "no physical_package_id; package taken from its package cpu set")
            pid = assigned[pset]
        elif pid == _UNKNOWN:
            notes.cpu(c.id, "no physical_package_id and no package cpu set; assuming package 0")
            pid = 0
        out.append(c if pid == c.package_id else replace(c, package_id=pid))
    return tuple(out)


def _cpu_from_cpuinfo(cpu: int, numa: int | None, cpuinfo: _CpuinfoLazy, notes: Notes) -> CPU:
    """A CPU of a kernel without topology files (before 2.6.16)."""
    ids = cpuinfo.get(cpu)
    if ids is None or ids.package_id is None:
        notes.cpu(cpu, "no topology files and no ids in /proc/cpuinfo; own package 0 and core")
        return CPU(id=cpu, package_id=0, core_id=cpu, numa_node=numa, thread_siblings=CPUSet([cpu]))
    notes.cpu(cpu, "no topology files; package/core ids taken from /proc/cpuinfo")
    core = ids.core_id if ids.core_id is not None else cpu
    return CPU(
        id=cpu,
        package_id=ids.package_id,
        core_id=core,
        numa_node=numa,
        thread_siblings=cpuinfo.siblings(cpu),
    )


# -- NUMA -------------------------------------------------------------------------
def _read_numa(
    sysfs_root: str, procfs_root: str, cpus: CPUSet, notes: Notes
) -> tuple[tuple[NUMANode, ...], dict[int, int]]:
    """NUMA nodes (CPU sets made disjoint) and cpu -> node for online CPUs."""
    node_dir = os.path.join(sysfs_root, "devices", "system", "node")
    ids = listdir_ids(node_dir, "node")
    if not ids:
        # s390, 32-bit kernels without CONFIG_NUMA, small arm boards.
        memtotal = notes.text(os.path.join(procfs_root, "meminfo"), stream=True)
        m = _MEMTOTAL.search(memtotal or "")
        notes.warn(f"no NUMA information under {node_dir}; assuming one node 0 with all cpus")
        node = NUMANode(0, cpus, int(m.group(1)) * 1024 if m else None, {0: 10})
        return (node,), {c: 0 for c in cpus}

    # Each distance row is ordered like the online nodes (for_each_online_node);
    # a row as long as the possible nodes is accepted too (hand-offlined nodes).
    online_nodes = notes.cpuset(os.path.join(node_dir, "online"))
    possible_nodes = notes.cpuset(os.path.join(node_dir, "possible"))
    order = sorted(online_nodes) if online_nodes is not None else ids
    orders = [order] + ([sorted(possible_nodes)] if possible_nodes and sorted(possible_nodes) != order else [])
    missing = set(order) - set(ids)
    if missing:
        notes.warn(f"nodes {CPUSet(missing)} are online but have no directory under {node_dir}")

    numa_of: dict[int, int] = {}
    nodes: list[NUMANode] = []
    no_cpulist = False
    for nid in ids:
        d = f"{node_dir}/node{nid}"
        # kernels before 2.6.2x have only cpumap: once a node lacks cpulist, go to cpumap first
        node_cpus = notes.cpuset(f"{d}/cpumap", f"{d}/cpulist", first_is_mask=True) if no_cpulist else notes.cpuset(f"{d}/cpulist", f"{d}/cpumap")
        if not no_cpulist and node_cpus is not None and not os.path.exists(f"{d}/cpulist"):
            no_cpulist = True
        if node_cpus is None:
            notes.warn(f"node{nid}: no readable cpulist/cpumap; treated as having no cpus")
            node_cpus = CPUSet()
        dup = CPUSet(c for c in node_cpus if c in numa_of)
        if dup:
            owners = CPUSet(numa_of[c] for c in dup)
            notes.warn(
                f"node{nid}: cpus {dup} are already in node(s) {owners} (buggy NUMA table); "
                f"kept in the first node only"
            )
            node_cpus = node_cpus - dup
        for c in node_cpus:
            numa_of[c] = nid
        meminfo = notes.text(f"{d}/meminfo")
        m = _NODE_MEMTOTAL.search(meminfo or "")
        if meminfo is not None and m is None:
            notes.warn(f"node{nid}: no MemTotal in meminfo")
        memory = int(m.group(1)) * 1024 if m else None
        nodes.append(NUMANode(nid, node_cpus, memory, _distances(d, nid, orders, set(ids), notes)))

    orphans = cpus - CPUSet(numa_of)
    if orphans:
        notes.warn(f"cpus {orphans} are in no NUMA node (node offline or table incomplete)")
    return tuple(nodes), {c: n for c, n in numa_of.items() if c in cpus}


def _distances(d: str, nid: int, orders: list[list[int]], existing: set[int], notes: Notes) -> dict[int, int]:
    raw = notes.text(f"{d}/distance")
    if raw is None:
        notes.warn(f"node{nid}: no distance file")
        return {}
    try:
        row = [int(x) for x in raw.split()]
    except ValueError:
        notes.warn(f"node{nid}: unreadable distance row {raw.strip()[:60]!r}")
        return {}
    for i, order in enumerate(orders):
        if len(row) == len(order):
            if i:
                notes.warn(f"node{nid}: distance row matches the possible nodes, not the online ones")
            return {n: v for n, v in zip(order, row, strict=True) if n in existing}
    notes.warn(f"node{nid}: distance row has {len(row)} entries for {len(orders[0])} online nodes; ignored")
    return {}


# -- caches -----------------------------------------------------------------------
def _attr_names(d: str) -> frozenset[str]:
    try:
        return frozenset(os.listdir(d))
    except OSError:
        return frozenset()


def _cache_sharers(d: str, cpu: int, attrs: frozenset[str], notes: Notes) -> CPUSet | None:
    if "shared_cpu_list" in attrs:
        return notes.cpuset(f"{d}/shared_cpu_list", f"{d}/shared_cpu_map", containing=cpu)
    # before 2.6.2x: the mask only
    return notes.cpuset(f"{d}/shared_cpu_map", f"{d}/shared_cpu_list", containing=cpu, first_is_mask=True)


def _read_caches(cpu_dir: str, cpus: dict[int, CPUSet], notes: Notes) -> tuple[Cache, ...]:
    """One ``Cache`` per instance: (level, type, sharing set) read once per group of sharers.

    ``cpus`` maps each online CPU to its thread siblings: a cache whose sharing
    map is empty (old ia64 kernels) is taken to be core-local, as hwloc does.

    Caches are most of the files a topology reading opens (a core's L1d, L1i
    and L2 are separate instances), so per instance only what identifies and
    sizes it is read: sharing set, level, type, size and, for caches shared by
    several cores, the kernel's ``id`` (an L3's id is its resctrl domain).
    A core-private cache at the same index and of the same size as one
    already read is the same design: its level and type are taken from that
    one (the kernel numbers a CPU's cache leaves in a fixed order per core
    design, and a different design at the same index shows in its size or
    its sharing). Shared caches are always read in full.
    ``coherency_line_size`` and ``ways_of_associativity`` describe the cache
    design, not the instance: they are read once per (level, type, size) and
    given to every instance of that design. Attribute files the first CPU's
    first cache lacks (``id`` before 4.15) are not tried elsewhere.
    """
    seen: dict[tuple[int, str, CPUSet], Cache] = {}
    design: dict[tuple[int, str, int | None], tuple[int | None, int | None]] = {}
    private_kind: dict[tuple[int, int | None, bool], tuple[int, str]] = {}
    # indexM -> CPUs already answered by a sharer. The kernel numbers a CPU's
    # caches by level and type, so a sharer's indexM is the same cache.
    covered: dict[int, set[int]] = {}
    attrs: frozenset[str] | None = None
    template: list[int] | None = None
    for n, cpu in enumerate(cpus):
        base = f"{cpu_dir}/cpu{cpu}/cache"
        if n == 2 and not covered and not os.path.isdir(base):
            break  # three CPUs without a cache directory: this kernel exports none (ia64, old arm)
        # The first CPU's index list stands for the others (the kernel gives
        # every CPU of a design the same leaves); one stat of the index after
        # the last catches a CPU with more, which is then listed in full.
        if template is None or os.path.isdir(f"{base}/index{len(template)}"):
            indexes = listdir_ids(base, "index")
            if template is None:
                template = indexes
        else:
            indexes = template
        for index in indexes:
            done = covered.setdefault(index, set())
            if cpu in done:
                continue
            d = f"{base}/index{index}"
            if attrs is None:
                attrs = _attr_names(d)
            shared = _cache_sharers(d, cpu, attrs, notes)
            if shared is None and indexes is template and not os.path.isdir(d):
                continue  # this CPU has fewer cache leaves than the first
            if shared is None:
                notes.cpu(cpu, f"cache index{index}: no shared_cpu_list/map naming the cpu; assumed core-local")
                shared = cpus[cpu]
            done.update(shared)
            core_private = shared <= cpus[cpu]
            size_text = notes.text(f"{d}/size")
            size = (parse_size(size_text) if size_text else None) or None
            shape = (index, size, core_private)
            level: int | None
            if core_private and shape in private_kind:
                level, ctype = private_kind[shape]
            else:
                level = notes.integer(f"{d}/level")
                ctype = (notes.text(f"{d}/type") or "Unified").strip()
                if level is None:
                    notes.cpu(cpu, f"cache index{index}: no level; ignored")
                    continue
                if core_private:
                    private_kind[shape] = (level, ctype)
            key = (level, ctype, shared)
            if key in seen:
                continue
            kind = (level, ctype, size)
            if kind not in design:
                design[kind] = (
                    notes.integer(f"{d}/coherency_line_size") or None if "coherency_line_size" in attrs else None,
                    notes.integer(f"{d}/ways_of_associativity") or None if "ways_of_associativity" in attrs else None,
                )
            line_size, ways = design[kind]
            seen[key] = Cache(
                level=level,
                type=ctype,
                size_bytes=size,
                cpus=shared,
                id=notes.integer(f"{d}/id") if "id" in attrs and not core_private else None,
                line_size=line_size,
                ways=ways,
            )
    return tuple(sorted(seen.values(), key=lambda c: (c.level, c.type, c.cpus.first())))
