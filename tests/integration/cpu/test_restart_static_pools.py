"""A start with ``[advisor]`` off after a run in which the advisor sized the pools: the pools
go back to the sizes the shared pods' requests give (issue 26), journaled; with the advisor
on they are kept (the advisor hands its size over again on its first interval)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent.contracts import CPU_POLICY
from agent.contracts.cpu import Request
from agent.cpu.calculator import TopoIndex
from agent.cpu.checkpoint import CheckpointStore
from agent.cpu.component import options_from_config
from agent.cpu.policy import DynamicPolicy
from agent.config import section_defaults
from agent.topology.model import synthetic

from .common import component, make_ctx

TOPO = synthetic(sockets=1, numa_per_socket=2, cores_per_numa=2, threads_per_core=2)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def sizes(pools) -> dict[str, int]:
    return {k: len(v) for k, v in pools.items()}


def checkpoints(root: Path, advised: int | None) -> dict[str, int]:
    """A checkpoint with one running 1-cpu shared pod, its pool grown by the advisor to
    ``advised`` cpus (None: never advised); the pool sizes the policy gives without it."""
    store = CheckpointStore(root / "cpu", online=TopoIndex(TOPO).all)
    clock = Clock()
    options = options_from_config(section_defaults().sections["cpu"], len(TOPO.online))
    policy = DynamicPolicy(TOPO, options, clock=clock)
    policy.allocate(Request(pod_uid="ls", container_name="c", resource_requests={"cpu": 1}))
    clock.t += 3600  # past ramp-up: the pod is in the share pool
    policy.resources_allocation()
    static = sizes(policy.state.pools)
    if advised is not None:
        assert policy.resize_shared(advised)
        assert sizes(policy.state.pools) != static
    store.save(policy.state)
    return static


def started_pools(tmp: Path, root: Path, advisor: bool) -> dict[str, int]:
    ctx = make_ctx(root, TOPO, tmp / "cg", enforce_cgroups=False)
    if advisor:
        ctx.config = ctx.config.replace("advisor", enabled=True)

    async def main() -> dict[str, int]:
        comp = component(ctx)
        await comp.start(ctx)
        try:
            return sizes(ctx.lookup(CPU_POLICY).pools())
        finally:
            await comp.stop()

    return asyncio.run(main())


def test_a_start_with_the_advisor_off_restores_the_request_sized_pools(tmp_path):
    root = tmp_path / "root"
    static = checkpoints(root, advised=6)
    assert static["share"] != 6
    assert started_pools(tmp_path, root, advisor=False) == static
    # the restored pools were committed: a second start reads them from the checkpoint as they are
    assert started_pools(tmp_path, root, advisor=False) == static


def test_a_start_with_the_advisor_on_keeps_its_pools(tmp_path):
    root = tmp_path / "root"
    checkpoints(root, advised=6)
    assert started_pools(tmp_path, root, advisor=True)["share"] == 6


def test_a_start_from_a_checkpoint_never_advised_changes_nothing(tmp_path):
    root = tmp_path / "root"
    static = checkpoints(root, advised=None)
    assert started_pools(tmp_path, root, advisor=False) == static
