"""Metrics per NUMA node and page size, read from the memory manager at scrape time."""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import REGISTRY, generate_latest

from agent.config import section_defaults
from agent.contracts import MEMORY_MANAGER, DaemonContext
from agent.status.component import StatusComponent
from agent.topology.model import synthetic
from tests.unit.memoryviews.fake import GI, MI, FakeAllocator, empty_allocator


def _scrape_lines(text: str) -> set[str]:
    return {line for line in text.splitlines() if line.startswith("hwagent_memory_")}


def test_the_daemon_serves_per_node_and_page_size_series_that_follow_the_manager(short_tmp):
    alloc: FakeAllocator = empty_allocator()

    async def go():
        ctx = DaemonContext(config=section_defaults(), root_dir=short_tmp, mode="standalone",
                            log=logging.getLogger("t"), topology=synthetic(sockets=2, numa_per_socket=1, cores_per_numa=2))
        ctx.publish(MEMORY_MANAGER, alloc)
        comp = StatusComponent()
        await comp.start(ctx)
        try:
            before = _scrape_lines(generate_latest(REGISTRY).decode())
            from agent.contracts.hints import TopologyHint
            from agent.contracts.memory import MemoryRequest

            await alloc.allocate(MemoryRequest("u", "c", {"memory": GI, "hugepages-2Mi": 32 * MI},
                                               hint=TopologyHint(frozenset({1}), True)))
            after = _scrape_lines(generate_latest(REGISTRY).decode())
        finally:
            await comp.stop()
        gone = _scrape_lines(generate_latest(REGISTRY).decode())
        return before, after, gone

    before, after, gone = asyncio.run(go())
    assert 'hwagent_memory_total_bytes{numa_node="0",resource="memory"} 4.294967296e+09' in before
    assert 'hwagent_memory_reserved_bytes{numa_node="0",resource="memory"} 2.68435456e+08' in before
    assert 'hwagent_memory_allocatable_bytes{numa_node="1",resource="hugepages-1Gi"} 0.0' in before
    assert 'hwagent_memory_free_bytes{numa_node="1",resource="hugepages-2Mi"} 6.7108864e+07' in before
    assert "hwagent_memory_containers 0.0" in before
    # an allocation shows at the next scrape, on its node and page size only
    assert 'hwagent_memory_allocated_bytes{numa_node="1",resource="memory"} 1.073741824e+09' in after
    assert 'hwagent_memory_free_bytes{numa_node="1",resource="hugepages-2Mi"} 3.3554432e+07' in after
    assert 'hwagent_memory_allocated_bytes{numa_node="0",resource="memory"} 0.0' in after
    assert "hwagent_memory_containers 1.0" in after
    assert gone == set()  # a stopped status component leaves no collector behind
