"""Topology hints: the pure generation (kubelet topology_hints cases) and
``resource_hints`` over the manager's table, in container and pod scope."""

from __future__ import annotations

from agent.devicemanager.hints import container_hints, generate_hints, resource_hints
from agent.contracts.devices import Allocation, Device, ResourceDevices
from agent.devicemanager.pod_devices import PodDevices


def devs(*specs: tuple[str, tuple[int, ...]], healthy: bool = True) -> dict[str, Device]:
    return {i: Device(i, healthy, numa) for i, numa in specs}


def H(hints):
    return [(h.nodes, h.preferred) for h in hints] if hints is not None else None


class TestHints:
    """TestGetTopologyHints common cases."""

    def test_no_topology_is_no_preference(self):
        d = devs(("a", ()), ("b", ()))
        assert container_hints((0, 1), d, (), ["a", "b"], (), 1) is None

    def test_only_one_with_alignment(self):
        d = devs(("dev1", ()), ("dev2", (1,)))
        assert H(container_hints((0, 1), d, (), ["dev1", "dev2"], (), 1)) == [((1,), True), ((0, 1), False)]

    def test_one_device_per_socket(self):
        d = devs(("a", (0,)), ("b", (1,)))
        assert H(container_hints((0, 1), d, (), ["a", "b"], (), 1)) == [((0,), True), ((1,), True), ((0, 1), False)]
        assert H(container_hints((0, 1), d, (), ["a", "b"], (), 2)) == [((0, 1), True)]

    def test_two_devices_per_socket(self):
        d = devs(("a", (0,)), ("b", (0,)), ("c", (1,)), ("e", (1,)))
        assert H(container_hints((0, 1), d, (), list(d), (), 2)) == [((0,), True), ((1,), True), ((0, 1), False)]

    def test_forced_cross_numa_is_not_preferred(self):
        d = devs(("a", (0,)), ("b", (0,)), ("c", (1,)), ("e", (1,)))
        assert H(container_hints((0, 1), d, (), ["b", "c"], (), 2)) == [((0, 1), False)]

    def test_more_requested_than_available(self):
        d = devs(("a", (0,)), ("b", (1,)))
        assert container_hints((0, 1), d, (), ["a", "b"], (), 3) == []

    def test_regenerated_from_what_the_container_holds(self):
        d = devs(("a", (0,)), ("b", (0,)), ("c", (1,)))
        assert H(container_hints((0, 1), d, ["a", "b"], [], (), 2)) == [((0,), True), ((0, 1), False)]
        assert container_hints((0, 1), d, ["a"], ["b", "c"], (), 2) == []  # less than requested
        assert container_hints((0, 1), d, ["a", "b"], [], (), 1) == []  # more than requested

    def test_reusable_devices_must_be_inside_the_mask(self):
        d = devs(("a", (0,)), ("b", (1,)), ("c", (1,)))
        hints = generate_hints((0, 1), d, available=["c"], reusable=["a"], request=2)
        assert H(hints) == [((0, 1), False)]  # b+c on node 1 would do, but the reusable one is on 0

    def test_many_devices_many_nodes_is_cheap_and_exact(self):
        d = {f"d{n}-{i}": Device(f"d{n}-{i}", True, (n,)) for n in range(8) for i in range(128)}
        hints = generate_hints(tuple(range(8)), d, list(d), (), 128)
        assert len(hints) == 255 and [h.nodes for h in hints if h.preferred] == [(n,) for n in range(8)]
        hints = generate_hints(tuple(range(8)), d, list(d), (), 129)
        assert all(len(h.nodes) >= 2 for h in hints) and sum(h.preferred for h in hints) == 28



RES = "example.com/r"


def _held(uid, container, ctype, *ids, committed=True):
    return Allocation(uid, "ns", uid, container, ctype, RES, tuple((d, (0,) if d < "c" else (1,)) for d in ids),
                      b"" if committed else None)


class TestResourceHints:
    """The one hint function both scopes use, over a table and the resources' devices."""

    resources = {RES: ResourceDevices.from_snapshot(devs(("a", (0,)), ("b", (0,)), ("c", (1,)), ("d", (1,))).values())}

    def test_container_scope_regenerates_from_what_the_container_holds(self):
        t = PodDevices()
        t.insert(_held("p", "c1", "app", "a", "b"))
        hints = resource_hints((0, 1), self.resources, t, "p", "c1", {RES: 2})
        assert H(hints[RES]) == [((0,), True), ((0, 1), False)]
        assert resource_hints((0, 1), self.resources, t, "p", "c1", {RES: 1}) == {RES: []}  # count changed

    def test_container_scope_sees_only_free_devices(self):
        t = PodDevices()
        t.insert(_held("q", "x", "app", "a", "b"))
        assert H(resource_hints((0, 1), self.resources, t, "p", "c1", {RES: 2})[RES]) == [((1,), True), ((0, 1), False)]
        assert resource_hints((0, 1), self.resources, t, "p", "c1", {RES: 3}) == {RES: []}

    def test_container_scope_takes_the_pods_init_devices_first(self):
        t = PodDevices()
        t.insert(_held("p", "init", "init", "a"))
        t.insert(_held("q", "x", "app", "b", "c"))
        # free: d (node 1); reusable: a (node 0), so only the two-node mask holds 2 with a inside it
        assert H(resource_hints((0, 1), self.resources, t, "p", "app", {RES: 2})[RES]) == [((0, 1), False)]
        assert resource_hints((0, 1), self.resources, t, "other", "app", {RES: 2}) == {RES: []}

    def test_pod_scope_is_what_the_whole_pod_holds(self):
        t = PodDevices()
        t.insert(_held("p", "init", "init", "a"))
        t.insert(_held("p", "app", "app", "a", "c"))
        hints = resource_hints((0, 1), self.resources, t, "p", None, {RES: 2})
        # a and c together, counted once each; not preferred: node 0 alone has two devices
        assert H(hints[RES]) == [((0, 1), False)]
        assert resource_hints((0, 1), self.resources, t, "p", None, {RES: 3}) == {RES: []}

    def test_unknown_and_zero_requests_are_left_out(self):
        t = PodDevices()
        assert resource_hints((0, 1), self.resources, t, "p", "c", {RES: 0, "example.com/none": 1}) == {}
        assert resource_hints((0, 1), self.resources, t, "p", None, {RES: 0, "example.com/none": 1}) == {}

    def test_unhealthy_devices_are_not_offered(self):
        sick = {RES: ResourceDevices.from_snapshot([Device("a", False, (0,)), Device("c", True, (1,))])}
        assert H(resource_hints((0, 1), sick, PodDevices(), "p", "c", {RES: 1})[RES]) == [((1,), True), ((0, 1), False)]
