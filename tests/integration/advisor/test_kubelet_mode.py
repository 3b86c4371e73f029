"""The advisor in kubelet mode: the CPU policy serves its QRM plugin socket where a Katalyst-shaped
kubelet finds it, the kubelet allocates the pods (no launcher binds their cgroups: the pressure
engine knows them from the kubepods tree), and the advisor's re-size is what the kubelet side
reads back: GetResourcesAllocation (its reconcile) and Allocate of a running container answer the
new pool's CPUs, GetTopologyAwareResources its NUMA split, GetTopologyAwareAllocatableResources
stays the machine's allocatable CPUs. Cgroups: a fake v2 tree; the pressure engine: a stand-in
with the containers the kubepods tree would give it."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import tempfile
from pathlib import Path

import grpc
import pytest

from agent.advisor.component import AdvisorComponent
from agent.advisor.config import ADVISOR_SECTION
from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
from agent.config import section_defaults
from agent.contracts import ACTIVE_PODS, PRESSURE, DaemonContext
from agent.contracts.hist import Histogram
from agent.contracts.pressure import Container
from agent.cpu.component import CPUPolicyComponent
from agent.cpu.qos import QOS_KEY
from agent.cpu.state import validate_state
from agent.cpuset import CPUSet
from agent.pods import StaticActivePods
from agent.tasks import cancel_and_wait
from agent.topology.model import synthetic

#: 16 cpus, 4 NUMA nodes (node n = 2n, 2n+1, 2n+8, 2n+9)
TOPO = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=2, threads_per_core=2)
KUBEPODS = "/kubepods/burstable"


@pytest.fixture
def tmp_path():
    """Short: the plugin's socket lives under it."""
    d = Path(tempfile.mkdtemp(prefix="hwadv-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class KubepodsPressure:
    """The pressure engine as kubelet mode has it: the policy's containers joined with their
    cgroups from the kubepods tree (``PressureEngine.read_containers``), and their run-queue
    counters (grown by the test)."""

    def __init__(self) -> None:
        self.containers: list[Container] = []
        self.rq: dict[tuple[str, str], Histogram] = {}

    def watch(self, uid: str, qos: str) -> str:
        path = f"{KUBEPODS}/pod{uid}/{cid(uid)}"
        self.containers.append(Container(uid, "c", qos, CPUSet(), cgroup_path=path, pod_namespace="ns", pod_name=uid))
        return path

    def grow(self, key: tuple[str, str], slot: int, n: int) -> None:
        slots = [0] * (slot + 1)
        slots[slot] = n
        self.rq[key] = self.rq.get(key, Histogram()) + Histogram.from_slots(slots, n * (2**slot) * 1000)

    def container_runqueue(self) -> dict[tuple[str, str], Histogram]:
        return dict(self.rq)


def cid(uid: str) -> str:
    """The container's id, as the runtime names its cgroup directory."""
    return (uid.encode().hex() * 64)[:64]


def rq(uid: str, qos: str, cpus: float) -> pb.ResourceRequest:
    return pb.ResourceRequest(pod_uid=uid, pod_namespace="ns", pod_name=uid, container_name="c",
                              container_type=pb.MAIN, resource_name="cpu", resource_requests={"cpu": cpus},
                              annotations={QOS_KEY: qos})


def make_ctx(tmp: Path) -> DaemonContext:
    cg = tmp / "cg"
    cg.mkdir()
    (cg / "cgroup.controllers").write_text("cpuset cpu\n")
    cfg = section_defaults()
    cfg = cfg.replace("daemon", root_dir=str(tmp / "root"), cgroup_root=str(cg), kubelet_root_dir=str(tmp / "kubelet"))
    cfg = cfg.replace("cpu", reserved_cpus=2)
    cfg = cfg.replace("advisor", enabled=True)
    ctx = DaemonContext(config=cfg, root_dir=tmp / "root", topology=TOPO, mode="kubelet", log=logging.getLogger("t"))
    ctx.publish(ACTIVE_PODS, StaticActivePods())
    return ctx


def cgroup(tmp: Path, path: str, mems: str | None = None) -> None:
    d = tmp / "cg" / path.lstrip("/")
    d.mkdir(parents=True)
    for x in (d, *d.parents):  # a cpuset cgroup's files, down from the kubepods root
        if x == tmp / "cg":
            break
        for name, value in (("cpuset.cpus", "0-15"), ("cpuset.mems", "0-3")):
            if not (x / name).exists():
                (x / name).write_text(value + "\n")
    (d / "cpu.stat").write_text("usage_usec 0\n")
    (d.parent / "cpu.stat").write_text("usage_usec 0\n")
    (d.parent / "cpu.max").write_text("max 100000\n")
    if mems is not None:  # where the container's memory is
        (d / "cpuset.mems").write_text(mems + "\n")


def test_a_resize_by_the_advisor_is_what_the_kubelet_reads_back(tmp_path):
    async def scenario() -> None:
        ctx = make_ctx(tmp_path)
        clock = Clock(1000.0)
        cpu = CPUPolicyComponent(ctx.config.sections["cpu"], clock=clock)
        await cpu.start(ctx)
        assert cpu.socket_path == tmp_path / "kubelet" / "plugins_registry" / cpu.cfg.socket_name
        pressure = KubepodsPressure()
        ctx.publish(PRESSURE, pressure)  # type: ignore[arg-type]
        aclock = Clock(100.0)
        adv = AdvisorComponent(ctx.config[ADVISOR_SECTION], clock=aclock)
        try:
            async with grpc.aio.insecure_channel(f"unix://{cpu.socket_path}") as ch:
                stub = pb_grpc.ResourcePluginStub(ch)
                for uid, qos, cpus in (("ls", "shared_cores", 1), ("hog", "reclaimed_cores", 1)):
                    await stub.Allocate(rq(uid, qos, cpus))
                    cgroup(tmp_path, pressure.watch(uid, qos), mems="2" if uid == "ls" else None)
                clock.t += 31  # the kubelet's reconcile ends the shared pod's ramp-up
                await stub.GetResourcesAllocation(pb.GetResourcesAllocationRequest())
                policy = cpu.durable.policy
                assert policy.container("ls", "c").owner_pool_name == "share"

                await adv.start(ctx)
                await cancel_and_wait(adv._task)  # the test drives the ticks
                d = await adv.tick()
                assert ctx.lookup(PRESSURE) is pressure
                assert len(policy.state.pools["share"]) == 1, policy.state.pools  # advised: requests' size
                sizes = [1]
                for _ in range(8):
                    pressure.grow(("ls", "c"), 13, 100)  # ~8 ms waits: far over the 400 us target
                    aclock.t += 1.0
                    d = await adv.tick()
                    validate_state(policy.state)
                    sizes.append(len(policy.state.pools["share"]))
                assert d.sample.shared_p99_us is not None, "the advisor saw no shared pod in kubelet mode"
                assert max(sizes) > 1, f"the advisor never grew the pool in kubelet mode: {sizes}"
                share = policy.state.pools["share"]
                reclaim = policy.state.pools["reclaim"]

                # what the kubelet reads back: the reconcile, a re-Allocate, the topology-aware calls
                alloc = await stub.GetResourcesAllocation(pb.GetResourcesAllocationRequest())
                got = {uid: CPUSet.parse(p.container_resources["c"].resource_allocation["cpu"].allocation_result)
                       for uid, p in alloc.pod_resources.items()}
                assert got == {"ls": share, "hog": reclaim}
                again = await stub.Allocate(rq("ls", "shared_cores", 1))
                assert CPUSet.parse(again.allocation_result.resource_allocation["cpu"].allocation_result) == share
                tar = await stub.GetTopologyAwareResources(
                    pb.GetTopologyAwareResourcesRequest(pod_uid="ls", container_name="c"))
                res = tar.container_topology_aware_resources.allocated_resources["cpu"]
                assert res.aggregated_quantity == len(share)
                per = {q.node: q.resource_value for q in res.topology_aware_quantity_list}
                assert per == {n: len(c) for n, c in policy.assignments(share).items()}
                # the shared pod's memory is on node 2: the pool grew there
                assert per.get(2, 0) == max(per.values()) and per[2] >= 2, per
                ar = await stub.GetTopologyAwareAllocatableResources(pb.GetTopologyAwareAllocatableResourcesRequest())
                a = ar.allocatable_resources["cpu"]
                assert (a.aggregated_allocatable_quantity, a.aggregated_capacity_quantity) == (14, 16)
                allocatable = {q.node: q.resource_value for q in a.topology_aware_allocatable_quantity_list}
                assert sum(allocatable.values()) == 14
                for n, c in policy.assignments(share).items():  # the pool fits what each node offers
                    assert len(c) <= allocatable[n]
                assert not share & policy.reserved
                recs = [json.loads(x) for x in (tmp_path / "root" / "advisor" / "decisions.jsonl").read_text().splitlines()]
                # hwagent's enforcer writes the new pools into the containers' cgroups it finds
                # under the kubepods tree too (the kubelet's reconcile writes the same)
                await cpu.check_once()
                for uid, want in (("ls", share), ("hog", reclaim)):
                    f = tmp_path / "cg" / KUBEPODS.lstrip("/") / f"pod{uid}" / cid(uid) / "cpuset.cpus"
                    assert CPUSet.parse(f.read_text().strip()) == want, uid
                grows = [r for r in recs if r["action"] == "grow"]
                assert grows and grows[-1]["shared_pods"] == ["ns/ls"] and grows[-1]["reclaimed_pods"] == ["ns/hog"]
        finally:
            await adv.stop()
            await cpu.stop()

    asyncio.run(scenario())
