"""The machine as boxes, the way lstopo draws it, with what hwagent manages on top.

Pure: ``build`` turns a ``Topology`` (plus devices and an ``Overlay``) into a
tree of ``Box``es nested by CPU set, and ``layout`` places them; the SVG writer
(``agent.topology.svg``) only paints what is placed here. Keeping the two apart
is what lets the tests check the structure (every CPU once, every device once)
without parsing pixels.

Nesting follows the CPU sets, as hwloc does: an object goes inside the
smallest object whose CPUs include its own; equal sets nest in the order
distance group, package, die, NUMA node, last-level cache, cluster, compute
unit, core, CPU. So one node per package draws as package > node > L3 > cores,
and two packages per node (old ia64) as node > packages. Memory-only NUMA
nodes sit in the distance group they belong to; PCI devices in their NUMA node.

Readable at 256 CPUs / 64 nodes: NUMA nodes are grouped by distance (see
``agent.topology.distance``), rows wrap at a width chosen from the CPU count,
and boxes shrink on big machines.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from agent.cpuset import CPUSet
from agent.topology.distance import distance_levels
from agent.topology.model import NUMANode, Topology
from agent.topology.overlay import AllocationMark, DeviceMark, MemoryMark, Overlay, PoolMark
from agent.topology.render import human_bytes

__all__ = ["Box", "DeviceItem", "Scale", "build", "layout"]

#: nesting order for objects with equal CPU sets, outermost first
RANK = ("machine", "dgroup", "package", "die", "numa", "llc", "cluster", "compute_unit", "core", "pu")


@dataclass(frozen=True)
class DeviceItem:
    """One device to draw: from the inventory, an overlay, or both."""

    id: str
    label: str  # what the box says first (name or address)
    detail: str  # second line (class or children)
    numa: int | None
    mark: DeviceMark | None = None


@dataclass
class Box:
    kind: str  # one of RANK, or "io" / "device"
    label: str
    cpus: CPUSet = field(default_factory=CPUSet)
    detail: str = ""
    children: list[Box] = field(default_factory=list)
    #: the CPU for "pu", the device for "device", the NUMA node id for "numa"
    cpu: int | None = None
    device: DeviceItem | None = None
    numa: int | None = None
    #: the NUMA nodes of a distance group ("dgroup")
    nodes: CPUSet | None = None
    pool: PoolMark | None = None
    #: every pool holding a "pu" (``pool`` is the first of them)
    pools: tuple[PoolMark, ...] = ()
    allocation: AllocationMark | None = None
    tooltip: str = ""
    x: float = 0
    y: float = 0
    w: float = 0
    h: float = 0

    def walk(self) -> Iterable[Box]:
        yield self
        for c in self.children:
            yield from c.walk()


@dataclass(frozen=True)
class Scale:
    """Sizes in px; smaller on big machines so 256 CPUs fit a screen's width."""

    pu_w: float = 44
    pu_h: float = 34
    dev_w: float = 190
    dev_h: float = 50
    pad: float = 5
    gap: float = 5
    title: float = 15
    font: float = 11
    max_width: float = 1400

    @staticmethod
    def for_cpus(n: int) -> Scale:
        if n > 128:
            return Scale(pu_w=36, pu_h=30, dev_w=170, dev_h=44, pad=4, gap=4, title=13, font=9.5, max_width=2000)
        if n > 32:
            return Scale(pu_w=40, pu_h=32, pad=4, gap=4, title=14, font=10, max_width=1700)
        return Scale()


# -- building the tree ---------------------------------------------------------------
def _insert(root: Box, box: Box) -> None:
    """Put ``box`` inside the deepest box whose CPUs include all of its own."""
    parent = root
    while True:
        for child in parent.children:
            if child.kind in ("io", "device") or not child.cpus:
                continue
            if box.cpus <= child.cpus:
                parent = child
                break
        else:
            parent.children.append(box)
            return


def build(topo: Topology, devices: Sequence[DeviceItem] = (), overlay: Overlay | None = None, title: str = "") -> Box:
    overlay = overlay or Overlay()
    root = Box("machine", title or "Machine", topo.online, detail=_machine_detail(topo))
    objects = _group_boxes(topo, overlay) + _core_boxes(topo, overlay)
    rank = {k: i for i, k in enumerate(RANK)}
    objects.sort(key=lambda b: (-len(b.cpus), rank[b.kind], b.cpus.first() if b.cpus else -1))
    for b in objects:
        _insert(root, b)
    _collapse(root)
    _add_memory_only_nodes(root, topo, overlay)
    _attach_devices(root, devices, overlay)
    _order(root)
    return root


def _memory_marks(marks: Sequence[MemoryMark]) -> tuple[str, str]:
    """A NUMA node's placed memory: the head's summary ("memory 512 MiB, hugepages-2Mi 64 MiB
    placed") and the tooltip, one pod and container a line."""
    if not marks:
        return "", ""
    total: dict[str, int] = {}
    per: dict[tuple[str, str], list[str]] = {}
    for m in marks:
        total[m.resource] = total.get(m.resource, 0) + m.size
        per.setdefault((m.pod, m.container), []).append(f"{m.resource} {human_bytes(m.size)}")
    head = ", ".join(f"{r} {human_bytes(v)}" for r, v in sorted(total.items())) + " placed"
    tip = "\n".join(f"{pod} {c}: {', '.join(parts)}" for (pod, c), parts in sorted(per.items()))
    return head, tip


def _numa_box(n: NUMANode, cpus: CPUSet, overlay: Overlay, memory_only: bool = False) -> Box:
    head, tip = _memory_marks(overlay.memory_of_node(n.id))
    detail = human_bytes(n.memory_bytes) + (", memory only" if memory_only else "") + (f"; {head}" if head else "")
    return Box("numa", f"NUMA node {n.id}", cpus, detail=detail, numa=n.id,
               tooltip=f"NUMA node {n.id}: {detail}" + (f"\n{tip}" if tip else ""))


def _group_boxes(topo: Topology, overlay: Overlay) -> list[Box]:
    """The boxes above the cores: distance groups, packages, dies/clusters, NUMA nodes with CPUs, LLCs."""
    online = topo.online
    objects: list[Box] = []
    levels = distance_levels(topo)
    # outermost level first; a level's groups of one node add nothing
    for level in reversed(levels):
        for nodeset in level.groups:
            nodes = [n for n in nodeset if n in topo.numa_ids]
            cpus = CPUSet.union_all(topo.numa_node(n).cpus for n in nodes) & online
            if len(nodes) > 1 and cpus:
                objects.append(Box("dgroup", f"NUMA nodes {nodeset}", cpus, detail=f"within distance {level.distance}",
                                   nodes=nodeset))
    for p in topo.package_ids:
        logical = topo.logical_package[p]
        label = f"Package {logical}" + (f" [{p}]" if p != logical else "")
        objects.append(Box("package", label, topo.cpus_of_package(p), detail=f"{len(topo.cores_of_package(p))} cores"))
    for g in topo.groups:
        name = {"die": "Die", "cluster": "Cluster", "compute_unit": "Compute unit"}[g.kind]
        objects.append(Box(g.kind, f"{name} {g.id}" if g.id is not None else name, g.cpus))
    for n in topo.numa_nodes:
        if n.cpus & online:
            objects.append(_numa_box(n, n.cpus & online, overlay))
    for c in topo.last_level_caches:
        if c.cpus & online:
            objects.append(Box("llc", f"L{c.level} {human_bytes(c.size_bytes)}", c.cpus & online))
    return objects


def _core_boxes(topo: Topology, overlay: Overlay) -> list[Box]:
    """A box per core and per CPU (its tooltip: where it sits, its pool, who holds it)."""
    pools = overlay.pools_of_cpu()
    allocs = overlay.allocation_of_cpu()
    objects: list[Box] = []
    for k in topo.cores:
        objects.append(Box("core", f"Core {k.core_id}", k.cpus))
        for cpu in k.cpus:
            a = allocs.get(cpu)
            held = pools.get(cpu, ())
            pool = held[0] if held else None
            tip = [f"CPU {cpu}", f"core {k.core_id}", f"package {topo.logical_package[k.package_id]}"]
            if topo.cpu(cpu).numa_node is not None:
                tip.append(f"NUMA node {topo.cpu(cpu).numa_node}")
            for p in held:
                tip.append(f"pool {p.name}" + ("" if p.pressure is None else f" (pressure {p.pressure:.2f})"))
            if a is not None:
                tip.append(f"{a.pod} {a.container} ({a.pool})")
            if cpu in topo.isolated:
                tip.append("isolated")
            objects.append(Box("pu", str(cpu), CPUSet([cpu]), cpu=cpu, pool=pool, pools=held, allocation=a,
                               tooltip=", ".join(tip)))
    return objects


def _add_memory_only_nodes(root: Box, topo: Topology, overlay: Overlay) -> None:
    """Memory-only nodes: in the smallest distance group naming them, else the machine."""
    for n in topo.numa_nodes:
        if n.cpus & topo.online:
            continue
        box = _numa_box(n, CPUSet(), overlay, memory_only=True)
        homes = [b for b in root.walk() if b.nodes is not None and n.id in b.nodes]
        home = min(homes, key=lambda b: len(b.nodes or ()), default=root)
        home.children.append(box)


def _collapse(box: Box) -> None:
    """Drop distance groups that hold a single object with their own CPUs.

    Other boxes stay even when they repeat a CPU set: a core of one CPU keeps
    its box (the core is what the policy hands out) and a last-level cache the
    size of its NUMA node its size label.
    """
    for c in box.children:
        _collapse(c)
    merged = []
    for c in box.children:
        if c.kind == "dgroup" and len(c.children) == 1 and c.children[0].cpus == c.cpus:
            merged.append(c.children[0])  # a group around one object says nothing
        else:
            merged.append(c)
    box.children = merged


def _order(box: Box) -> None:
    def key(b: Box) -> tuple:
        if b.kind == "io":
            return (2, 0)
        if b.kind == "numa" and not b.cpus:
            return (1, b.numa or 0)
        return (0, b.cpus.first() if b.cpus else 0)

    box.children.sort(key=key)
    for c in box.children:
        _order(c)


def _attach_devices(root: Box, devices: Sequence[DeviceItem], overlay: Overlay) -> None:
    numa_boxes = {b.numa: b for b in root.walk() if b.kind == "numa"}
    seen = {d.id for d in devices}
    items = list(devices)
    for m in overlay.devices:
        if m.id not in seen:  # a plugin's device this inventory does not list
            items.append(DeviceItem(m.id, m.id, m.resource, m.numa[0] if m.numa else None, m))
            seen.add(m.id)
    homes: dict[int | None, list[DeviceItem]] = {}
    for d in items:
        mark = d.mark or overlay.device(d.id)
        d = DeviceItem(d.id, d.label, d.detail, d.numa, mark)
        home = d.numa if d.numa in numa_boxes else None
        homes.setdefault(home, []).append(d)
    for numa, ds in homes.items():
        parent = numa_boxes[numa] if numa is not None else root
        label = "I/O" if numa is not None else "I/O without a NUMA node"
        io = Box("io", label, CPUSet(), numa=numa)
        for d in sorted(ds, key=lambda d: d.id):
            io.children.append(Box("device", d.label, CPUSet(), detail=d.detail, device=d, tooltip=_device_tip(d)))
        parent.children.append(io)


def _device_tip(d: DeviceItem) -> str:
    parts = [d.id, d.label, d.detail]
    if d.mark is not None:
        parts += [d.mark.resource, "healthy" if d.mark.healthy else "UNHEALTHY"]
        if d.mark.pod:
            parts.append(f"allocated to {d.mark.pod}")
    return ", ".join(p for p in dict.fromkeys(parts) if p)


def _machine_detail(topo: Topology) -> str:
    memory = sum(n.memory_bytes or 0 for n in topo.numa_nodes)
    return (
        f"{len(topo.cpus)} CPUs, {len(topo.package_ids)} packages, {len(topo.cores)} cores, "
        f"{len(topo.numa_nodes)} NUMA nodes, {human_bytes(memory)}"
    )


# -- layout --------------------------------------------------------------------------
def layout(root: Box, scale: Scale) -> tuple[float, float]:
    """Place every box (x, y, w, h); returns the picture's width and height."""
    _place(root, scale, scale.max_width)
    _move(root, 0, 0)
    return root.w, root.h


def _place(box: Box, s: Scale, max_w: float) -> None:
    if box.kind == "pu":
        box.w, box.h = s.pu_w, s.pu_h
        return
    if box.kind == "device":
        box.w, box.h = s.dev_w, s.dev_h
        return
    inner = max_w - 2 * s.pad
    for c in box.children:
        _place(c, s, inner)
    head = s.title if box.kind != "core" else s.title - 3
    x = y = 0.0
    row_h = 0.0
    width = 0.0
    cpu_children = [c for c in box.children if c.kind not in ("io",)]
    io_children = [c for c in box.children if c.kind == "io"]
    for c in cpu_children:
        if x > 0 and x + c.w > inner:
            y += row_h + s.gap
            x, row_h = 0.0, 0.0
        c.x, c.y = x, y
        x += c.w + s.gap
        row_h = max(row_h, c.h)
        width = max(width, x - s.gap)
    y += row_h
    for c in io_children:  # I/O goes below the CPUs, on its own rows
        if y > 0:
            y += s.gap
        c.x, c.y = 0.0, y
        y += c.h
        width = max(width, c.w)
    label_w = (len(box.label) + len(box.detail) + 3) * s.font * 0.62
    box.w = max(width, label_w if box.kind not in ("core",) else 0, s.pu_w) + 2 * s.pad
    box.h = head + y + 2 * s.pad if box.children else head + 2 * s.pad
    # children coordinates become relative to the box's content origin
    for c in box.children:
        c.x += s.pad
        c.y += head + s.pad


def _move(box: Box, dx: float, dy: float) -> None:
    box.x += dx
    box.y += dy
    for c in box.children:
        _move(c, box.x, box.y)
