"""Who holds which devices: the pod -> container -> resource -> devices table.

One table serves two owners: the device manager (its live allocations,
reservations included) and the checkpoint's replay (where every allocation
read from disk is checked before it is believed). The kubelet keeps the same
table in ``pod_devices.go``; ours adds a device -> holders index per resource,
so "is this device free" and "who would share it" cost a lookup, not a scan.

Checkpoint conversion is ``to_checkpoint`` (the committed allocations, what a
snapshot holds) and ``from_checkpoint`` / ``add_checked`` (allocations read
back, refused before anything changes when no run of the host could have
produced them: a device held by two containers outside the init-container
reuse rule, an unknown container type, empty names, one key twice).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator

from agent.contracts.devices import CONTAINER_TYPES, Allocation

#: (pod uid, container name, resource)
Key = tuple[str, str, str]


class InconsistentAllocations(ValueError):
    """Allocations that break the table's rules (the checkpoint calls it corrupt)."""


class PodDevices:
    """Allocations by key, by pod, and a per-resource device -> holders index.

    Plain bookkeeping with no I/O and no awaits: the manager calls it from its
    one loop between awaits, the replay from one thread.
    """

    def __init__(self) -> None:
        self._allocs: dict[Key, Allocation] = {}
        #: tuples, not sets: a pod has a few allocations and a device one or two holders, and
        #: a one-element set is 216 B against 48 (10,000 pods held 4.3 MB of them; issue 24, RSS)
        self._by_pod: dict[str, tuple[Key, ...]] = {}
        #: resource -> device id -> keys of the allocations holding it
        self._holders: dict[str, dict[str, tuple[Key, ...]]] = {}

    # ------------------------------------------------------------- changes

    def insert(self, a: Allocation) -> None:
        """Record ``a`` (a reservation or a restored allocation), unchecked. The
        three indexes share one key object (``a.key`` builds a new tuple each time)."""
        key = a.key
        if key in self._allocs:
            self.remove(key)
        self._allocs[key] = a
        self._by_pod[a.pod_uid] = (*self._by_pod.get(a.pod_uid, ()), key)
        holders = self._holders.setdefault(a.resource, {})
        for dev in a.device_ids:
            holders[dev] = (*holders.get(dev, ()), key)

    def commit(self, a: Allocation) -> None:
        """Replace the reservation of ``a.key`` by ``a`` (same devices, now with
        the plugin's response): the indexes do not change."""
        self._allocs[a.key] = a

    def remove(self, key: Key) -> Allocation | None:
        a = self._allocs.pop(key, None)
        if a is None:
            return None
        _without(self._by_pod, a.pod_uid, key)
        by_device = self._holders.get(a.resource, {})
        for dev in a.device_ids:
            _without(by_device, dev, key)
        return a

    def remove_pod(self, pod_uid: str) -> list[Key]:
        """Forget every allocation of a pod; the keys it had."""
        keys = list(self._by_pod.get(pod_uid, ()))
        for key in keys:
            self.remove(key)
        return keys

    # --------------------------------------------------------------- reads

    def get(self, key: Key) -> Allocation | None:
        return self._allocs.get(key)

    def holds(self, a: Allocation) -> bool:
        """``a`` itself (not a later allocation under its key) is still recorded."""
        return self._allocs.get(a.key) is a

    def __len__(self) -> int:
        return len(self._allocs)

    def __iter__(self) -> Iterator[Allocation]:
        return iter(list(self._allocs.values()))

    def committed(self) -> list[Allocation]:
        return [a for a in self._allocs.values() if a.committed]

    def pods(self) -> list[str]:
        return list(self._by_pod)

    def pod_committed(self, pod_uid: str) -> bool:
        """No allocation of the pod is still waiting for its plugin."""
        return all(self._allocs[k].committed for k in self._by_pod.get(pod_uid, ()))

    def container_allocations(self, pod_uid: str) -> dict[str, list[Allocation]]:
        """Committed allocations of a pod by container, in key order."""
        out: dict[str, list[Allocation]] = {}
        for key in sorted(self._by_pod.get(pod_uid, ())):
            a = self._allocs[key]
            if a.committed:
                out.setdefault(a.container_name, []).append(a)
        return out

    def container_devices(self, pod_uid: str, container_name: str, resource: str) -> tuple[str, ...]:
        """What the container holds of ``resource`` (reserved or committed)."""
        a = self._allocs.get((pod_uid, container_name, resource))
        return a.device_ids if a is not None else ()

    def pod_devices(self, pod_uid: str, resource: str) -> set[str]:
        """What the pod's containers hold of ``resource`` together."""
        held: set[str] = set()
        for a in self._pod_allocations(pod_uid, resource):
            held.update(a.device_ids)
        return held

    def reusable(self, pod_uid: str, resource: str) -> set[str]:
        """Devices of the pod's regular init containers not held by its app
        containers or sidecars: what later containers of the pod take first."""
        pool: set[str] = set()
        taken: set[str] = set()
        for a in self._pod_allocations(pod_uid, resource):
            (pool if a.container_type == "init" else taken).update(a.device_ids)
        return pool - taken

    def in_use(self, resource: str, device: str) -> bool:
        return device in self._holders.get(resource, {})

    def free(self, resource: str, healthy: Collection[str]) -> frozenset[str]:
        """The healthy devices no container holds."""
        held = self._holders.get(resource, {})
        return frozenset(d for d in healthy if d not in held)

    def allocated_count(self, resource: str) -> int:
        """Devices of ``resource`` held by at least one container."""
        return len(self._holders.get(resource, {}))

    def _pod_allocations(self, pod_uid: str, resource: str) -> Iterator[Allocation]:
        for key in self._by_pod.get(pod_uid, ()):
            if key[2] == resource:
                yield self._allocs[key]

    # ------------------------------------------------- checkpoint conversion

    def to_checkpoint(self) -> tuple[Allocation, ...]:
        """What a snapshot holds: the committed allocations."""
        return tuple(self.committed())

    @classmethod
    def from_checkpoint(cls, allocations: Iterable[Allocation]) -> PodDevices:
        """A table of allocations read back; InconsistentAllocations if they break its rules."""
        table = cls()
        table.add_checked(allocations)
        return table

    def add_checked(self, allocations: Iterable[Allocation]) -> None:
        """Record allocations read back (a snapshot, one journal record),
        replacing those under the same keys; refuses, before changing anything,
        what no run of the host could have produced."""
        allocs = list(allocations)
        keys = {a.key for a in allocs}
        if len(keys) != len(allocs):
            raise InconsistentAllocations("an allocation is recorded twice")
        for a in allocs:
            _check_alone(a)
        for (resource, dev), holders in self._holders_after(allocs, keys).items():
            if len(holders) > 1 and not _reuse_allows(holders):
                who = ", ".join(f"{h.pod_uid}/{h.container_name}" for h in holders)
                raise InconsistentAllocations(f"device {dev} of {resource} is held by {who}")
        for a in allocs:
            self.insert(a)

    def _holders_after(
        self, allocs: list[Allocation], replacing: set[Key]
    ) -> dict[tuple[str, str], list[Allocation]]:
        """(resource, device) -> holders, for the devices ``allocs`` take, once they are in."""
        incoming: dict[tuple[str, str], list[Allocation]] = {}
        for a in allocs:
            for d in a.device_ids:
                incoming.setdefault((a.resource, d), []).append(a)
        return {
            (resource, d): [
                self._allocs[k] for k in self._holders.get(resource, {}).get(d, ()) if k not in replacing
            ] + new
            for (resource, d), new in incoming.items()
        }


def _without(index: dict[str, tuple[Key, ...]], name: str, key: Key) -> None:
    """``index[name]`` without ``key``; the entry goes when no key is left."""
    keys = index.get(name)
    if keys is None:
        return
    rest = tuple(k for k in keys if k != key)
    if rest:
        index[name] = rest
    else:
        del index[name]


def _check_alone(a: Allocation) -> None:
    """The rules one allocation keeps by itself."""
    if not a.pod_uid or not a.container_name or not a.resource:
        raise InconsistentAllocations(f"allocation with an empty pod uid, container or resource: {a.key}")
    if a.container_type not in CONTAINER_TYPES:
        raise InconsistentAllocations(f"unknown container type {a.container_type!r}")
    ids = a.device_ids
    if len(set(ids)) != len(ids) or not all(ids):
        raise InconsistentAllocations(f"allocation {a.key} lists a device twice or an empty id")


def _reuse_allows(holders: list[Allocation]) -> bool:
    """Init containers of one pod may share a device with each other and with
    at most one later container of the same pod (the kubelet's reuse)."""
    if len({h.pod_uid for h in holders}) > 1:
        return False
    return sum(1 for h in holders if h.container_type != "init") <= 1

