"""The component's periodic passes driven by hand: residual cleanup against
the active-pods source, ramp-up completion, cpu.idle on a fake v2 tree."""

from __future__ import annotations

import asyncio

from agent.contracts import ACTIVE_PODS, CPU_POLICY
from agent.contracts.cpu import Request
from agent.cpu.qos import QOS_KEY
from agent.topology.model import synthetic

from .common import component, make_ctx

TOPO = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=2, threads_per_core=2)


class Clock:
    t = 5000.0

    def __call__(self):
        return self.t


def v2(root):
    be = root / "kubepods.slice" / "kubepods-besteffort.slice"
    be.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu\n")
    (be / "cpu.idle").write_text("0\n")
    return root


def test_residual_cleanup_and_ramp_up(tmp_path):
    clock = Clock()
    ctx = make_ctx(tmp_path / "root", TOPO, v2(tmp_path / "cg"), residual_cleanup_s=300, transition_period_s=30)
    active = ctx.lookup(ACTIVE_PODS)

    async def main():
        comp = component(ctx, clock)
        await comp.start(ctx)
        try:
            svc = ctx.lookup(CPU_POLICY)
            for uid in ("keep", "drop"):
                await svc.allocate(Request(pod_uid=uid, container_name="c", resource_requests={"cpu": 1}))
            active.set({"keep"})
            assert await comp.residual_once() == []
            clock.t += 299
            assert await comp.residual_once() == []
            clock.t += 1
            assert await comp.residual_once() == ["drop"]
            assert [a.pod_uid for a in svc.allocations()] == ["keep"]
            # ramp-up ends on the periodic pass (no kubelet polling in standalone)
            assert svc.allocations()[0].ramp_up is True  # nothing has ended it yet
            await comp.check_once()
            a = svc.allocations()[0]
            assert not a.ramp_up and a.owner_pool_name == "share"
            # removal through the service other components use
            assert await svc.release_pod("keep") is True
            assert svc.allocations() == []
        finally:
            await comp.stop()
        # persisted: a fresh start sees the removals
        comp2 = component(ctx, clock)
        await comp2.start(ctx)
        try:
            assert ctx.lookup(CPU_POLICY).allocations() == []
        finally:
            await comp2.stop()

    asyncio.run(main())


def test_cpu_idle_sync_fake_v2(tmp_path):
    root = v2(tmp_path / "cg")
    ctx = make_ctx(tmp_path / "root", TOPO, root, sync_cpu_idle=True, cpu_idle=True)

    async def main():
        comp = component(ctx)
        await comp.start(ctx)
        try:
            assert comp.reclaim_cgroup() == "/kubepods.slice/kubepods-besteffort.slice"
            assert await comp.cpu_idle_once() is True
            assert (root / "kubepods.slice/kubepods-besteffort.slice/cpu.idle").read_text() == "1"
            assert await comp.cpu_idle_once() is False
        finally:
            await comp.stop()

    asyncio.run(main())


def test_reclaimed_pod_gets_reclaim_pool(tmp_path):
    ctx = make_ctx(tmp_path / "root", TOPO, v2(tmp_path / "cg"))

    async def main():
        comp = component(ctx)
        await comp.start(ctx)
        try:
            r = await ctx.lookup(CPU_POLICY).allocate(
                Request(pod_uid="r", container_name="c", resource_requests={"cpu": 1},
                        annotations={QOS_KEY: "reclaimed_cores"})  # fmt: skip
            )
            assert r.allocation.cpuset == comp.durable.policy.state.pools["reclaim"]
        finally:
            await comp.stop()

    asyncio.run(main())


def test_the_published_handle_is_the_durable_policy(tmp_path):
    """No forwarding layer between the contract and the policy: admission, the runtime and
    status call the durable policy itself, so each change is journaled before it returns
    and a cgroup outside the workload roots is refused before anything changes."""
    # no cgroup writes: what is checked here is the call path, not the enforcer
    ctx = make_ctx(tmp_path / "root", TOPO, v2(tmp_path / "cg"), enforce_cgroups=False)

    async def main():
        comp = component(ctx)
        await comp.start(ctx)
        try:
            svc = ctx.lookup(CPU_POLICY)
            assert svc is comp.durable
            await svc.allocate(Request(pod_uid="p", container_name="c", resource_requests={"cpu": 1}))
            before = comp.durable.policy.state
            try:
                await svc.bind_cgroup("p", "c", "/etc/not-a-workload")
            except ValueError as e:
                assert "workload" in str(e)
            else:
                raise AssertionError("a cgroup outside the workload roots was bound")
            assert comp.durable.policy.state is before  # refused before anything changed
            await svc.bind_cgroup("p", "c", "/kubepods.slice/pod-p/c")
            assert svc.allocations()[0].cgroup_path == "/kubepods.slice/pod-p/c"
            assert await svc.release_pod("p") is True and svc.allocations() == []
        finally:
            await comp.stop()

    asyncio.run(main())
