"""Pure decisions of the device manager: which devices a container gets
(the NUMA masks that could satisfy a request are ``hints``).

These follow the kubelet's ``devicesToAllocate``/``filterByAffinity`` so a
plugin sees the same requests from hwagent as from a kubelet. The one impure
step, the plugin's advisory GetPreferredAllocation, is passed in as an
awaitable callback so the order of decisions stays here and is testable
without gRPC.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence

from agent.contracts.devices import NO_TOPOLOGY, Device

#: (available, must_include, size) -> the plugin's preferred ids
PreferredFn = Callable[[frozenset[str], frozenset[str], int], Awaitable[Sequence[str]]]


class AllocationError(Exception):
    """An allocation that cannot be made; ``code`` names the gRPC status it maps to."""

    def __init__(self, message: str, code: str = "FAILED_PRECONDITION") -> None:
        super().__init__(message)
        self.code = code


def filter_by_affinity(
    available: Collection[str],
    devices: Mapping[str, Device],
    hint: frozenset[int] | None,
) -> tuple[set[str], set[str], set[str]]:
    """Split available devices into (aligned, unaligned, no-affinity).

    Nodes are visited hint nodes first (fewest available devices first), then
    the other real nodes (fewest first), then "no topology"; a device on
    several nodes lands in the list of the first node visited.
    Without a hint, or when no device of the resource has topology, every
    device is no-affinity.
    """
    if hint is None or not any(d.numa for d in devices.values()):
        return set(), set(), set(available)
    per_node: dict[int, list[str]] = {}
    for dev in sorted(available):
        for node in devices[dev].numa or (NO_TOPOLOGY,):
            per_node.setdefault(node, []).append(dev)

    def order(node: int) -> tuple[int, int, int]:
        group = 0 if node in hint else (2 if node == NO_TOPOLOGY else 1)
        return (group, len(per_node[node]), node)

    aligned: set[str] = set()
    unaligned: set[str] = set()
    no_affinity: set[str] = set()
    seen: set[str] = set()
    for node in sorted(per_node, key=order):
        target = aligned if node in hint else (no_affinity if node == NO_TOPOLOGY else unaligned)
        for dev in per_node[node]:
            if dev not in seen:
                seen.add(dev)
                target.add(dev)
    return aligned, unaligned, no_affinity


async def select_devices(
    *,
    resource: str,
    required: int,
    devices: Mapping[str, Device],
    available: frozenset[str],
    reusable: Iterable[str],
    hint: frozenset[int] | None,
    preferred: PreferredFn | None,
) -> list[str]:
    """Choose ``required`` devices, in the kubelet's order of preference.

    ``available`` = healthy and not held by anyone; ``reusable`` = devices of
    this pod's regular init containers that no app container or sidecar holds
    (they come first). Then, with a NUMA hint: aligned devices (letting the
    plugin choose among them when more are aligned than needed), the plugin's
    preference over everything available, unaligned, no-topology.
    """
    picked: list[str] = []
    picked_set: set[str] = set()

    def take(candidates: Iterable[str]) -> bool:
        for dev in sorted(candidates):
            if len(picked) >= required:
                break
            if dev not in picked_set:
                picked.append(dev)
                picked_set.add(dev)
        return len(picked) >= required

    if required <= 0:
        return []
    if take(d for d in reusable if devices.get(d) is not None and devices[d].healthy):
        return picked
    needed = required - len(picked)
    free = available - picked_set
    if len(free) < needed:
        raise AllocationError(
            f"requested number of devices unavailable for {resource}. "
            f"Requested: {needed}, Available: {len(free)}",
            "RESOURCE_EXHAUSTED",
        )
    aligned, unaligned, no_affinity = filter_by_affinity(free, devices, hint)

    async def ask(offered: set[str]) -> set[str]:
        if preferred is None:
            return set()
        answer = await preferred(frozenset(offered | picked_set), frozenset(picked_set), required)
        return set(answer)

    if needed < len(aligned):
        if take(await ask(aligned) & aligned) or take(aligned):
            return picked
        raise AllocationError(f"allocated fewer devices than required for {resource}", "INTERNAL")
    if take(aligned):
        return picked
    if take(await ask(set(free)) & free):
        return picked
    if take(unaligned) or take(no_affinity):
        return picked
    raise AllocationError(f"allocated fewer devices than required for {resource}", "INTERNAL")
