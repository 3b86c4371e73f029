"""Which devices a container gets, decided against a table: the live one
(``DeviceManager.allocate``) or a private copy (``DevicePlan``, an admission's
decision, which must not change anything).

Both paths call the same two functions, so the devices a decision promises are
the devices the allocation that follows it takes: ``existing_allocation`` (a
repeated Allocate answers from the container's commit) and ``choose`` (fresh
devices, in the kubelet's order of preference). The plan never calls a plugin's
Allocate; it may ask GetPreferredAllocation, which is advisory and changes
nothing on the plugin's side, exactly as the allocation would.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

from agent.devicemanager.hints import resource_hints
from agent.contracts.hints import TopologyHint
from agent.contracts.devices import Allocation, ResourceDevices
from agent.devicemanager.pod_devices import PodDevices
from agent.devicemanager.selection import AllocationError, PreferredFn, select_devices

if TYPE_CHECKING:
    from agent.contracts.devices import ContainerAllocation, ContainerRequest

__all__ = ["DevicePlan", "existing_allocation", "choose"]


def existing_allocation(
    req: ContainerRequest, resource: str, existing: Allocation, res: ResourceDevices | None
) -> Allocation:
    """The container's recorded allocation of ``resource``, if it still answers the request."""
    count = req.resources[resource]
    if not existing.committed:
        raise AllocationError(
            f"pod {req.pod_uid!r} container {req.container_name!r} is already being allocated {resource}",
            "ABORTED",
        )
    if len(existing.device_ids) != count:
        raise AllocationError(
            f"pod {req.pod_uid!r} container {req.container_name!r} changed request for resource "
            f"{resource!r} from {len(existing.device_ids)} to {count}",
            "FAILED_PRECONDITION",
        )
    healthy = res.healthy if res else frozenset()
    if not set(existing.device_ids) <= healthy:
        raise AllocationError(
            "previously allocated devices are no longer healthy; "
            f"cannot allocate unhealthy devices {resource}",
            "FAILED_PRECONDITION",
        )
    return existing


async def choose(
    req: ContainerRequest,
    resource: str,
    res: ResourceDevices | None,
    table: PodDevices,
    preferred_for: Callable[[str], PreferredFn | None],
) -> list[str]:
    """Fresh devices of ``resource`` for the container: the ids the request
    names (a decision being carried out: they must still be free), else the
    kubelet's choice inside the request's NUMA hint. ``preferred_for`` gives
    the plugin's GetPreferredAllocation (None: it has none) and raises when no
    plugin serves the resource."""
    count = req.resources[resource]
    if res is None:
        raise AllocationError(f"cannot allocate unregistered device {resource}", "NOT_FOUND")
    if not res.healthy:
        raise AllocationError(f"no healthy devices present; cannot allocate unhealthy devices {resource}", "UNAVAILABLE")
    preferred = preferred_for(resource)
    reusable = table.reusable(req.pod_uid, resource)
    available = table.free(resource, res.healthy)
    named = (req.devices or {}).get(resource)
    if named is not None:
        gone = sorted(d for d in named if d not in available and d not in reusable)
        if len(named) != count or len(set(named)) != len(named) or gone:
            raise AllocationError(
                f"devices {', '.join(gone) or ', '.join(named)} of {resource} are not free as decided; retry", "ABORTED"
            )
        return sorted(named)
    return await select_devices(
        resource=resource, required=count, devices=res.devices, available=available,
        reusable=reusable, hint=req.hint, preferred=preferred,
    )


def planned(req: ContainerRequest, resource: str, picked: Collection[str], res: ResourceDevices) -> Allocation:
    """The allocation record of ``picked`` (not committed: no plugin response yet)."""
    return Allocation(
        pod_uid=req.pod_uid, pod_namespace=req.pod_namespace, pod_name=req.pod_name,
        container_name=req.container_name, container_type=req.container_type, resource=resource,
        devices=tuple((d, res.devices[d].numa) for d in sorted(picked)),
    )


class DevicePlan:
    """The device manager's state copied for one decision: hints and choices
    against it, each choice recorded in the copy so the pod's next container
    sees it, the live table untouched."""

    def __init__(
        self,
        numa_ids: tuple[int, ...],
        devices: Mapping[str, ResourceDevices],
        table: PodDevices,
        preferred_for: Callable[[str], PreferredFn | None],
    ) -> None:
        self.numa_ids = numa_ids
        self._devices = dict(devices)
        self._table = table
        self._preferred_for = preferred_for

    def hints(
        self, pod_uid: str, container_name: str | None, requests: Mapping[str, int]
    ) -> dict[str, list[TopologyHint] | None]:
        """``DeviceManager.topology_hints`` (a container) or ``pod_topology_hints`` (None) on the copy."""
        return resource_hints(self.numa_ids, self._devices, self._table, pod_uid, container_name, requests)

    async def allocate(self, req: ContainerRequest) -> ContainerAllocation:
        """What ``DeviceManager.allocate`` would give, recorded in the copy only."""
        from agent.devicemanager.manager import check_request
        from agent.contracts.devices import ContainerAllocation

        check_request(req)
        out: list[Allocation] = []
        for resource in sorted(r for r, n in req.resources.items() if n > 0):
            res = self._devices.get(resource)
            existing = self._table.get((req.pod_uid, req.container_name, resource))
            if existing is not None:
                out.append(existing_allocation(req, resource, existing, res))
                continue
            picked = await choose(req, resource, res, self._table, self._preferred_for)
            assert res is not None  # choose refuses an unknown resource
            a = planned(req, resource, picked, res)
            self._table.insert(a)
            out.append(a)
        return ContainerAllocation(req.pod_uid, req.container_name, tuple(out))
