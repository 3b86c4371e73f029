"""Topology hints of the device manager: which NUMA masks could hold a
request, for the topology manager to merge with the CPU policy's.

They follow the kubelet's ``topology_hints.go`` (``generateDeviceTopologyHints``)
so admission decides as a kubelet would. ``generate_hints``/``container_hints``
are pure over devices; ``resource_hints`` reads them off the manager's table
for one container or, with no container named, the whole pod.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import combinations

from agent.contracts.devices import Device, ResourceDevices
from agent.contracts.hints import TopologyHint
from agent.devicemanager.pod_devices import PodDevices


def _masks(numa_ids: Sequence[int]) -> Iterable[frozenset[int]]:
    for size in range(1, len(numa_ids) + 1):
        for combo in combinations(sorted(numa_ids), size):
            yield frozenset(combo)


def generate_hints(
    numa_ids: Sequence[int],
    devices: Mapping[str, Device],
    available: Collection[str],
    reusable: Collection[str],
    request: int,
) -> list[TopologyHint]:
    """Every NUMA mask whose devices can satisfy ``request``; the smallest preferred.

    The preferred size is the smallest mask whose devices (of any health) could
    hold the request at all, so a request forced across nodes by current
    allocations gets no preferred hint. Every reusable device with topology must
    fall inside a mask for it to count. Devices are grouped by their node set,
    so the cost grows with masks x distinct node sets, not with device count.
    """
    all_groups = Counter(d.numa for d in devices.values() if d.numa)
    avail_groups = Counter(devices[d].numa for d in available if d in devices and devices[d].numa)
    reuse_sets = {devices[d].numa for d in reusable if d in devices and devices[d].numa}
    reuse_count = sum(1 for d in reusable if d in devices and devices[d].numa)
    min_size = len(numa_ids)
    kept: list[frozenset[int]] = []
    for mask in _masks(numa_ids):
        in_mask = sum(n for nodes, n in all_groups.items() if mask.intersection(nodes))
        if in_mask >= request and len(mask) < min_size:
            min_size = len(mask)
        if any(not mask.intersection(nodes) for nodes in reuse_sets):
            continue
        matching = reuse_count + sum(n for nodes, n in avail_groups.items() if mask.intersection(nodes))
        if matching >= request:
            kept.append(mask)
    return [TopologyHint(m, len(m) == min_size) for m in kept]


def container_hints(
    numa_ids: Sequence[int],
    devices: Mapping[str, Device],
    held: Collection[str],
    available: Collection[str],
    reusable: Collection[str],
    request: int,
) -> list[TopologyHint] | None:
    """Hints for one resource of one container; None = no NUMA preference.

    A container that already holds devices (a restart) gets hints regenerated
    from exactly those, or ``[]`` if the count changed; ``[]`` also when too few
    devices are left.
    """
    if not any(d.numa for d in devices.values()):
        return None
    if held:
        if len(held) != request:
            return []
        return generate_hints(numa_ids, devices, held, (), request)
    if len(set(available) | set(reusable)) < request:
        return []
    return generate_hints(numa_ids, devices, available, reusable, request)


def resource_hints(
    numa_ids: Sequence[int],
    resources: Mapping[str, ResourceDevices],
    table: PodDevices,
    pod_uid: str,
    container_name: str | None,
    requests: Mapping[str, int],
) -> dict[str, list[TopologyHint] | None]:
    """Per requested resource: every NUMA mask that can satisfy the request
    (minimal ones preferred), ``None`` for no preference, ``[]`` for none
    possible; resources unknown or not asked for are left out.

    ``container_name`` set (container scope): the request against what that
    container holds, taking the pod's reusable init-container devices first.
    ``None`` (pod scope): the pod-level request against what the whole pod
    holds; nothing is reusable within the pod's own total.
    """
    out: dict[str, list[TopologyHint] | None] = {}
    for resource, count in sorted(requests.items()):
        res = resources.get(resource)
        if res is None or count <= 0:
            continue
        held: Collection[str]
        if container_name is None:
            held, reusable = table.pod_devices(pod_uid, resource), set()
        else:
            held = table.container_devices(pod_uid, container_name, resource)
            reusable = table.reusable(pod_uid, resource)
        available = table.free(resource, res.healthy)
        out[resource] = container_hints(numa_ids, res.devices, held, available, reusable, count)
    return out
