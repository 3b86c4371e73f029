"""Allocation over real gRPC: NUMA choice, preferred allocation, rollback,
init-container reuse, PreStartContainer, concurrency, active-pods release."""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest

from agent.contracts.devices import ContainerRequest
from agent.devicemanager.selection import AllocationError
from agent.pods import StaticActivePods
from tests.integration.devicemanager.fakeplugin import FakePlugin, dev
from tests.integration.devicemanager.harness import RES, RES2, host, run, until


async def _plugin(h, name, devices, resource=RES, **kw) -> FakePlugin:
    p = FakePlugin(h.sock(name), devices, **kw)
    await p.start()
    await p.register(h.socket, resource)
    await until(lambda: h.cap(resource)[0] == len({d.ID for d in devices}), what=f"{resource} snapshot")
    return p


def _numa_of(a, resource=RES):
    return {d: nodes for alloc in a.allocations if alloc.resource == resource for d, nodes in alloc.devices}


def test_allocation_errors_are_clear(sockdir):
    """TestPodContainerDeviceToAllocate / TestPodContainerDeviceAllocation messages."""

    async def main():
        async with host(sockdir) as h:
            p = await _plugin(h, "p.sock", [dev("a"), dev("b"), dev("u", healthy=False)])
            try:
                with pytest.raises(AllocationError, match="cannot allocate unregistered device example.com/none") as e:
                    await h.manager.allocate(ContainerRequest("pod", "c", {"example.com/none": 1}))
                assert e.value.code == "NOT_FOUND"
                a = await h.manager.allocate(ContainerRequest("pod", "c", {RES: 2}))
                assert sorted(a.devices(RES)) == ["a", "b"]
                with pytest.raises(AllocationError) as e:
                    await h.manager.allocate(ContainerRequest("pod2", "c", {RES: 1}))
                assert str(e.value) == f"requested number of devices unavailable for {RES}. Requested: 1, Available: 0"
                assert e.value.code == "RESOURCE_EXHAUSTED"
                with pytest.raises(AllocationError, match="changed request for resource"):
                    await h.manager.allocate(ContainerRequest("pod", "c", {RES: 1}))
                for bad in ({RES: -1}, {RES: 1.5}, {RES: True}):
                    with pytest.raises(AllocationError) as e:
                        await h.manager.allocate(ContainerRequest("pod3", "c", bad))
                    assert e.value.code == "INVALID_ARGUMENT"
                with pytest.raises(AllocationError, match="unknown container type"):
                    await h.manager.allocate(ContainerRequest("pod3", "c", {RES: 1}, container_type="weird"))
                # the container restarts: the same devices come back without a plugin call
                calls = len(p.calls.allocate)
                again = await h.manager.allocate(ContainerRequest("pod", "c", {RES: 2}))
                assert again.devices(RES) == a.devices(RES) and len(p.calls.allocate) == calls
                assert again.run_options().envs == a.run_options().envs
                # ... unless they turned unhealthy meanwhile
                p.update([dev("a", healthy=False), dev("b"), dev("u", healthy=False)])
                await until(lambda: h.cap() == (3, 1))
                with pytest.raises(AllocationError, match="previously allocated devices are no longer healthy"):
                    await h.manager.allocate(ContainerRequest("pod", "c", {RES: 2}))
                p.update([dev("u", healthy=False)])
                await until(lambda: h.cap() == (1, 0))
                with pytest.raises(AllocationError, match="no healthy devices present"):
                    await h.manager.allocate(ContainerRequest("pod9", "c", {RES: 1}))
                # zero devices: nothing to do, no plugin call
                z = await h.manager.allocate(ContainerRequest("pod9", "c", {RES: 0}))
                assert z.allocations == ()
            finally:
                await p.stop()

    run(main())


MIXED = [
    dev("n0-a", numa=[0]), dev("n0-b", numa=[0]),
    dev("n1-a", numa=[1]), dev("n1-b", numa=[1]), dev("n1-c", numa=[1]),
    dev("both", numa=[0, 1]),
    dev("none", numa=None),
]


@pytest.mark.parametrize(
    "hint,count,expect",
    [
        # aligned devices first; the multi-node device counts for the hint node
        (frozenset({1}), 2, {"both", "n1-a"}),
        (frozenset({1}), 4, {"both", "n1-a", "n1-b", "n1-c"}),
        # more than the hint node holds: spill to the other node, no-topology last
        (frozenset({0}), 4, {"n0-a", "n0-b", "both", "n1-a"}),
        (frozenset({0}), 7, {d.ID for d in MIXED}),
        # no hint: plain order, topology ignored
        (None, 2, {"both", "n0-a"}),
    ],
)
def test_numa_aware_choice_over_mixed_topology(sockdir, hint, count, expect):
    async def main():
        async with host(sockdir, numa_ids=(0, 1)) as h:
            p = await _plugin(h, "p.sock", MIXED)
            try:
                a = await h.manager.allocate(ContainerRequest("pod", "c", {RES: count}, hint=hint))
                assert set(a.devices(RES)) == expect
                assert sorted(p.calls.allocate[0]) == sorted(expect)
            finally:
                await p.stop()

    run(main())


def test_numa_spill_on_four_nodes(sockdir):
    """TestTopologyAlignedAllocation: hint {1,3} on a 4-node box -> 2 + 2."""
    devices = [dev(f"d{n}{i}", numa=[n]) for n in range(4) for i in range(2)]

    async def main():
        async with host(sockdir, numa_ids=(0, 1, 2, 3)) as h:
            p = await _plugin(h, "p.sock", devices)
            try:
                a = await h.manager.allocate(ContainerRequest("pod", "c", {RES: 4}, hint=frozenset({1, 3})))
                assert sorted(_numa_of(a).values()) == [(1,), (1,), (3,), (3,)]
            finally:
                await p.stop()

    run(main())


def test_get_preferred_allocation_is_honoured_within_the_offered_set(sockdir):
    devices = [dev(f"d{i}", numa=[i // 4]) for i in range(8)]

    def prefer(available, must, size):
        # prefers the highest ids, and tries to sneak in an id it was not offered
        return ["not-offered"] + sorted(available, reverse=True)[:size]

    async def main():
        async with host(sockdir, numa_ids=(0, 1)) as h:
            p = await _plugin(h, "p.sock", devices, preferred=prefer)
            try:
                a = await h.manager.allocate(ContainerRequest("pod", "c", {RES: 2}))
                assert set(a.devices(RES)) == {"d7", "d6"}
                avail, must, size = p.calls.preferred[0]
                assert sorted(avail) == [f"d{i}" for i in range(8)] and must == [] and size == 2
                # with a hint and more aligned devices than needed, only aligned ones are offered
                b = await h.manager.allocate(ContainerRequest("pod2", "c", {RES: 1}, hint=frozenset({0})))
                assert b.devices(RES) == ("d3",)
                avail, must, size = p.calls.preferred[1]
                assert sorted(avail) == ["d0", "d1", "d2", "d3"] and size == 1
                # the plugin failing the call fails the allocation and reserves nothing
                p.fail.preferred = grpc.StatusCode.INTERNAL
                with pytest.raises(AllocationError, match="GetPreferredAllocation failed"):
                    await h.manager.allocate(ContainerRequest("pod3", "c", {RES: 1}))
                assert {x.pod_uid for x in h.manager.allocations()} == {"pod", "pod2"}
            finally:
                await p.stop()

    run(main())


def test_preferred_allocation_gets_reusable_devices_as_must_include(sockdir):
    """TestGetPreferredAllocationParameters: reusable init devices are offered and must be kept."""
    devices = [dev(f"d{i}", numa=[0]) for i in range(6)]

    async def main():
        async with host(sockdir, numa_ids=(0,)) as h:
            p = await _plugin(h, "p.sock", devices, preferred=lambda av, must, n: sorted(av)[-n:])
            try:
                init = await h.manager.allocate(ContainerRequest("pod", "init", {RES: 2}, container_type="init"))
                app = await h.manager.allocate(ContainerRequest("pod", "app", {RES: 4}))
                avail, must, size = p.calls.preferred[-1]
                assert sorted(must) == sorted(init.devices(RES))
                assert set(avail) == set(f"d{i}" for i in range(6)) and size == 4
                assert set(init.devices(RES)) <= set(app.devices(RES))
            finally:
                await p.stop()

    run(main())


def test_plugin_allocate_failure_is_rolled_back(sockdir):
    async def main():
        async with host(sockdir) as h:
            p1 = await _plugin(h, "p1.sock", [dev("a"), dev("b")])
            p2 = await _plugin(h, "p2.sock", [dev("x")], resource=RES2)
            try:
                p2.fail.allocate = grpc.StatusCode.INTERNAL
                with pytest.raises(AllocationError, match="Allocate failed for example.com/other") as e:
                    await h.manager.allocate(ContainerRequest("pod", "c", {RES: 2, RES2: 1}))
                assert e.value.code == "UNAVAILABLE"
                assert p1.calls.allocate == [["a", "b"]]  # the first resource was allocated, then undone
                assert h.manager.allocations() == []
                assert h.manager.container_allocations("pod") == {}
                p2.fail.allocate = None
                ok = await h.manager.allocate(ContainerRequest("other", "c", {RES: 2, RES2: 1}))
                assert sorted(ok.devices(RES)) == ["a", "b"] and ok.devices(RES2) == ("x",)
            finally:
                await p1.stop()
                await p2.stop()

    run(main())


def test_init_container_devices_are_reused(sockdir):
    """TestInitContainerDeviceAllocation and TestRestartableInitContainerDeviceAllocation."""

    async def main():
        async with host(sockdir) as h:
            p = await _plugin(h, "p.sock", [dev(f"d{i}") for i in range(8)])
            q = await _plugin(h, "q.sock", [dev("x"), dev("y")], resource=RES2)
            try:
                m = h.manager
                i1 = await m.allocate(ContainerRequest("pod", "init1", {RES: 1}, container_type="init"))
                i2 = await m.allocate(ContainerRequest("pod", "init2", {RES: 2}, container_type="init"))
                a1 = await m.allocate(ContainerRequest("pod", "app1", {RES: 1, RES2: 1}))
                a2 = await m.allocate(ContainerRequest("pod", "app2", {RES: 1, RES2: 1}))
                assert set(i1.devices(RES)) < set(i2.devices(RES))
                assert set(a1.devices(RES)) <= set(i2.devices(RES))
                assert set(a2.devices(RES)) <= set(i2.devices(RES))
                assert not set(a1.devices(RES)) & set(a2.devices(RES))
                assert not set(a1.devices(RES2)) & set(a2.devices(RES2))
                # only 2 devices ever left the free pool for this pod
                assert len({d for x in m.allocations() if x.resource == RES for d in x.device_ids}) == 2
                # sidecars keep their devices: never shared with app containers
                s_init = await m.allocate(ContainerRequest("p2", "init", {RES: 3}, container_type="init"))
                s1 = await m.allocate(ContainerRequest("p2", "side1", {RES: 1}, container_type="sidecar"))
                s2 = await m.allocate(ContainerRequest("p2", "side2", {RES: 2}, container_type="sidecar"))
                b1 = await m.allocate(ContainerRequest("p2", "app1", {RES: 1}))
                b2 = await m.allocate(ContainerRequest("p2", "app2", {RES: 2}))
                assert set(s1.devices(RES)) | set(s2.devices(RES)) <= set(s_init.devices(RES))
                groups = [set(x.devices(RES)) for x in (s1, s2, b1, b2)]
                for i in range(4):
                    for j in range(i + 1, 4):
                        assert not groups[i] & groups[j]
            finally:
                await p.stop()
                await q.stop()

    run(main())


def test_prestart_container(sockdir):
    """TestDevicePreStartContainer, plus the deadline."""

    async def main():
        async with host(sockdir, prestart_timeout=0.3) as h:
            p = await _plugin(h, "p.sock", [dev("a"), dev("b"), dev("c")], pre_start_required=True)
            q = await _plugin(h, "q.sock", [dev("x")], resource=RES2)  # does not ask for it
            try:
                a = await h.manager.allocate(ContainerRequest("pod", "c", {RES: 2, RES2: 1}))
                await h.manager.pre_start("pod", "c")
                assert p.calls.prestart == [list(a.devices(RES))]
                await h.manager.allocate(ContainerRequest("pod", "zero", {RES: 0}))
                await h.manager.pre_start("pod", "zero")
                assert len(p.calls.prestart) == 1  # not called for a zero request
                p.fail.prestart_delay = 2.0
                with pytest.raises(AllocationError) as e:
                    await h.manager.pre_start("pod", "c")
                assert e.value.code == "DEADLINE_EXCEEDED"
                p.fail.prestart_delay, p.fail.prestart = 0.0, grpc.StatusCode.INTERNAL
                with pytest.raises(AllocationError, match="PreStartContainer failed"):
                    await h.manager.pre_start("pod", "c")
                opts = h.manager.run_options("pod", "c")
                assert len(opts.devices) == 3 and opts.envs["FAKE_DEVICES"]
                assert sorted(opts.cdi_devices) == sorted(f"example.com/fake={d}" for d in ("a", "b", "x"))
                assert len(opts.mounts) == 1  # same container path from both resources: first wins
            finally:
                await p.stop()
                await q.stop()

    run(main())


@pytest.mark.parametrize("preferred", [False, True])
def test_concurrent_allocations_never_hand_out_a_device_twice(sockdir, preferred):
    rng = random.Random(7)
    devices = [dev(f"g{i:02d}", numa=[i % 4]) for i in range(48)]

    def prefer(available, must, size):
        return rng.sample(sorted(available), min(size, len(available)))

    async def main():
        async with host(sockdir, numa_ids=(0, 1, 2, 3)) as h:
            p = await _plugin(h, "p.sock", devices, preferred=prefer if preferred else None)
            p.fail.allocate_delay = 0.002
            try:
                reqs = [
                    ContainerRequest(
                        f"pod{i}", "c", {RES: rng.randint(1, 3)},
                        hint=frozenset({rng.randrange(4)}) if i % 2 else None,
                    )
                    for i in range(80)
                ]
                results = await asyncio.gather(*(h.manager.allocate(r) for r in reqs), return_exceptions=True)
                ok = [r for r in results if not isinstance(r, BaseException)]
                errors = [r for r in results if isinstance(r, BaseException)]
                assert all(isinstance(e, AllocationError) and e.code == "RESOURCE_EXHAUSTED" for e in errors), errors
                handed = [d for r in ok for d in r.devices(RES)]
                assert len(handed) == len(set(handed)), "a device was handed out twice"
                assert len(handed) <= 48 and len(ok) > 10 and errors
                # the plugin saw exactly the same disjoint sets
                assert sorted(d for call in p.calls.allocate for d in call) == sorted(handed)
                # everything that failed left no trace
                assert {a.pod_uid for a in h.manager.allocations()} == {r.pod_uid for r in ok}
            finally:
                await p.stop()

    run(main())


def test_inactive_pods_are_released(sockdir):
    async def main():
        active = StaticActivePods({"p1", "p2"})
        async with host(sockdir, active_pods=active) as h:
            p = await _plugin(h, "p.sock", [dev("a"), dev("b")])
            try:
                m = h.manager
                await m.allocate(ContainerRequest("p1", "c", {RES: 1}))
                await m.allocate(ContainerRequest("p2", "c", {RES: 1}))
                with pytest.raises(AllocationError, match="unavailable"):
                    await m.allocate(ContainerRequest("p3", "c", {RES: 1}))
                active.set({"p2", "p3"})  # p1 terminated
                a = await m.allocate(ContainerRequest("p3", "c", {RES: 1}))
                assert {x.pod_uid for x in m.allocations()} == {"p2", "p3"}
                m.release_pod("p2")
                assert {x.pod_uid for x in m.allocations()} == {"p3"}
                m.release_pod("nope")  # unknown: a no-op
                assert a.devices(RES)
                hints = m.topology_hints("p4", "c", {RES: 1})
                assert hints[RES] is not None and len(hints[RES]) >= 1
            finally:
                await p.stop()

    run(main())


def test_topology_hints_over_grpc_state(sockdir):
    """Hints for a container reflect what is registered and what is already taken."""

    async def main():
        async with host(sockdir, numa_ids=(0, 1)) as h:
            p = await _plugin(h, "p.sock", [dev("a", numa=[0]), dev("b", numa=[0]), dev("c", numa=[1])])
            try:
                m = h.manager
                hints = m.topology_hints("pod", "c", {RES: 1})[RES]
                assert [(x.nodes, x.preferred) for x in hints] == [((0,), True), ((1,), True), ((0, 1), False)]
                hints = m.topology_hints("pod", "c", {RES: 2})[RES]
                assert [(x.nodes, x.preferred) for x in hints] == [((0,), True), ((0, 1), False)]
                await m.allocate(ContainerRequest("other", "c", {RES: 1}, hint=frozenset({0})))
                # one device left on node 0: two now only fit across both nodes, and nothing is preferred
                hints = m.topology_hints("pod", "c", {RES: 2})[RES]
                assert [(x.nodes, x.preferred) for x in hints] == [((0, 1), False)]
                assert m.topology_hints("pod", "c", {RES: 3})[RES] == []
                # an allocated container regenerates its hints from what it holds
                held = await m.allocate(ContainerRequest("pod", "c", {RES: 1}, hint=frozenset({1})))
                assert held.devices(RES) == ("c",)
                assert [(x.nodes, x.preferred) for x in m.topology_hints("pod", "c", {RES: 1})[RES]] == [
                    ((1,), True), ((0, 1), False)]
                assert m.topology_hints("pod", "c", {RES: 2})[RES] == []
                assert m.pod_topology_hints("pod", {RES: 1})[RES][0].nodes == (1,)
            finally:
                await p.stop()

    run(main())


def test_release_during_preferred_rpc_does_not_break_the_allocation(sockdir):
    """TestDevicesToAllocateConflictWithUpdateAllocatedDevices: state changes while
    GetPreferredAllocation is in flight; the allocation still gets exactly the answer."""

    async def main():
        async with host(sockdir) as h:
            def prefer(available, must, size):
                h.manager.release_pod("other")  # runs on the same loop, mid-allocation
                return ["d1"]

            p = await _plugin(h, "p.sock", [dev("d0"), dev("d1"), dev("d2")], preferred=prefer)
            try:
                p.preferred_fn = lambda a, m, n: ["d0"]
                await h.manager.allocate(ContainerRequest("other", "c", {RES: 1}))
                p.preferred_fn = prefer
                got = await h.manager.allocate(ContainerRequest("pod", "c", {RES: 1}))
                assert got.devices(RES) == ("d1",)
                assert [a.pod_uid for a in h.manager.allocations()] == ["pod"]
                # deregistering a pair that is not registered changes nothing
                await h.manager.deregister(RES, h.sock("nope.sock"))
                await h.manager.deregister("example.com/unknown", h.sock("p.sock"))
                assert h.cap() == (3, 3) and [e.state for e in h.manager.endpoints()] == ["connected"]
            finally:
                await p.stop()

    run(main())


def test_names_over_kubernetes_bounds_are_refused_and_long_device_ids_ignored(sockdir):
    """agent.limits applies to the host's own entry point as to the gRPC ones."""
    from agent.limits import MAX_BYTES

    async def main():
        async with host(sockdir) as h:
            p = FakePlugin(h.sock("p.sock"), [dev("a"), dev("b"), dev("z" * 254)])
            await p.start()
            try:
                await p.register(h.socket, RES)
                await until(lambda: h.cap() == (2, 2), what="the over-long id left out")
                bad = [
                    ContainerRequest("u" * (MAX_BYTES["pod_uid"] + 1), "c", {RES: 1}),
                    ContainerRequest("pod", "c" * 64, {RES: 1}),
                    ContainerRequest("pod", "c", {RES: 1}, pod_name="n" * 254),
                    ContainerRequest("pod", "c", {RES: 1}, pod_namespace="s" * 64),
                    ContainerRequest("pod", "c", {"example.com/" + "r" * 64: 1}),
                ]
                for req in bad:
                    with pytest.raises(AllocationError) as e:
                        await h.manager.allocate(req)
                    assert e.value.code == "INVALID_ARGUMENT" and len(str(e.value)) < 300
                assert h.manager.allocations() == [] and p.calls.allocate == []
                ok = await h.manager.allocate(ContainerRequest("pod", "c", {RES: 1}))
                assert ok.devices(RES)
            finally:
                await p.stop()

    run(main())
