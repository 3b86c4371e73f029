"""pod-resources v1 answers memory as the kubelet does: each container's memory
blocks from the memory manager (``ContainerResources.memory``: type, size, the
NUMA nodes of the block), and ``GetAllocatableResources.memory`` one entry per
NUMA node and resource with something allocatable. The manager is looked up when
a request comes (it may start after the pod-resources server)."""

from __future__ import annotations

import asyncio

from agent.api.podresources.v1 import api_pb2 as pr
from agent.podresources.server import PodResourcesServicer
from tests.unit.memoryviews.fake import GI, MI, FakeMemory, two_nodes


def _mem(entries) -> list[tuple[str, int, list[int]]]:
    return [(m.memory_type, m.size, [n.ID for n in m.topology.nodes]) for m in entries]


class Active:
    def __init__(self, uids: set[str]) -> None:
        self.uids = uids

    def active_pod_uids(self) -> set[str]:
        return self.uids


def test_list_and_get_show_each_containers_memory_blocks():
    fake = two_nodes()
    servicer = PodResourcesServicer(memory=lambda: fake, active_pods=lambda: Active({"u1", "u2"}))
    res = asyncio.run(servicer.List(pr.ListPodResourcesRequest(), None))
    got = {c.name: _mem(c.memory) for p in res.pod_resources for c in p.containers}
    assert got == {
        "app": [("memory", 512 * MI, [0]), ("hugepages-2Mi", 64 * MI, [0])],
        # a block that spans nodes is one entry whose topology names both (the kubelet's shape)
        "big": [("memory", 5 * GI, [0, 1])],
    }


def test_allocatable_memory_is_per_node_and_resource_without_empty_ones():
    fake = two_nodes()
    res = asyncio.run(PodResourcesServicer(memory=lambda: fake).GetAllocatableResources(
        pr.AllocatableResourcesRequest(), None))
    assert _mem(res.memory) == [
        ("hugepages-2Mi", 128 * MI, [0]),
        ("memory", 4 * GI - 256 * MI, [0]),
        # node 1's 1 GiB pages are all reserved: nothing allocatable, no entry
        ("hugepages-2Mi", 64 * MI, [1]),
        ("memory", 4 * GI, [1]),
    ]


def test_no_memory_manager_answers_without_memory_and_a_late_one_is_seen():
    held: list[FakeMemory] = []
    servicer = PodResourcesServicer(memory=lambda: held[0] if held else None)
    res = asyncio.run(servicer.GetAllocatableResources(pr.AllocatableResourcesRequest(), None))
    assert list(res.memory) == []
    assert list(asyncio.run(servicer.List(pr.ListPodResourcesRequest(), None)).pod_resources) == []
    held.append(two_nodes())  # published after the server started (a Deferred)
    res = asyncio.run(servicer.GetAllocatableResources(pr.AllocatableResourcesRequest(), None))
    assert len(res.memory) == 4


def test_inactive_pods_memory_is_not_listed():
    fake = two_nodes()
    servicer = PodResourcesServicer(memory=lambda: fake, active_pods=lambda: Active({"u1"}))
    res = asyncio.run(servicer.List(pr.ListPodResourcesRequest(), None))
    assert [c.name for p in res.pod_resources for c in p.containers] == ["app"]


def test_the_daemons_pod_resources_socket_asks_a_memory_manager_published_after_it(tmp_path):
    """The device-plugin host's component serves pod-resources before the memory
    manager starts; the handle published later is what the socket answers from."""
    import grpc

    from agent.api.podresources.v1 import api_pb2_grpc as pr_grpc
    from agent.config import section_defaults
    from agent.contracts import MEMORY_MANAGER, DaemonContext
    from agent.devicemanager.component import factory
    from agent.topology.model import synthetic

    async def main():
        root = tmp_path / "root"
        ctx = DaemonContext(config=section_defaults(), root_dir=root, mode="standalone",
                            topology=synthetic(sockets=2, numa_per_socket=1, cores_per_numa=2))
        comp = factory(ctx)
        assert comp is not None
        await comp.start(ctx)
        try:
            ctx.publish(MEMORY_MANAGER, two_nodes())
            async with grpc.aio.insecure_channel(f"unix://{root / 'pod-resources' / 'pod-resources.sock'}") as ch:
                stub = pr_grpc.PodResourcesListerStub(ch)
                alloc = await stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=10)
                listed = await stub.List(pr.ListPodResourcesRequest(), timeout=10)
        finally:
            await comp.stop()
        assert [(m.memory_type, m.topology.nodes[0].ID) for m in alloc.memory][:2] == [("hugepages-2Mi", 0),
                                                                                       ("memory", 0)]
        assert {c.name: len(c.memory) for p in listed.pod_resources for c in p.containers} == {"app": 2, "big": 1}

    asyncio.run(main())
