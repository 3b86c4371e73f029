"""`hwagent memory` asks the running daemon's status socket for the memory
manager's live view: per NUMA node and resource the total, reserved,
allocatable, allocated and free bytes, and each placed container's blocks."""

from __future__ import annotations

import asyncio
import json
import logging

from agent.cli import main
from agent.config import section_defaults
from agent.contracts import MEMORY_MANAGER, DaemonContext
from agent.status.component import StatusComponent
from agent.topology.model import synthetic
from tests.unit.memoryviews.fake import GI, MI, two_nodes


def _ask(base, capsys, argv, memory=True):
    """Start the status component (with the fake memory manager published) and run the CLI against it."""
    async def go():
        ctx = DaemonContext(config=section_defaults(), root_dir=base, mode="standalone", log=logging.getLogger("t"),
                            topology=synthetic(sockets=2, numa_per_socket=1, cores_per_numa=2))
        if memory:
            ctx.publish(MEMORY_MANAGER, two_nodes())
        comp = StatusComponent()
        await comp.start(ctx)
        try:
            capsys.readouterr()
            rc = await asyncio.get_running_loop().run_in_executor(None, main, [*argv, "--root-dir", str(base)])
            return rc, capsys.readouterr()
        finally:
            await comp.stop()

    return asyncio.run(go())


def test_json_gives_every_node_and_resource_and_the_blocks(short_tmp, capsys):
    rc, out = _ask(short_tmp, capsys, ["memory", "--format", "json"])
    assert rc == 0, out.err
    doc = json.loads(out.out)
    assert doc["source"] == "memory manager (live)"
    n0 = doc["nodes"][0]
    assert n0["node"] == 0 and n0["resources"]["memory"] == {
        "total": 4 * GI, "reserved": 256 * MI, "allocatable": 4 * GI - 256 * MI,
        "allocated": 512 * MI + 3 * GI, "free": 256 * MI}
    assert n0["resources"]["hugepages-2Mi"]["free"] == 64 * MI
    assert sorted(doc["nodes"][1]["resources"]) == ["hugepages-1Gi", "hugepages-2Mi", "memory"]
    big = next(c for c in doc["containers"] if c["container"] == "big")
    assert big["blocks"] == [{"resource": "memory", "size": 5 * GI, "numa_nodes": [0, 1],
                              "per_node": {"0": 3 * GI, "1": 2 * GI}}]


def test_text_is_a_table_per_node_and_page_size_then_the_containers(short_tmp, capsys):
    rc, out = _ask(short_tmp, capsys, ["memory"])
    assert rc == 0, out.err
    lines = out.out.splitlines()
    assert lines[0].split() == ["NUMA", "RESOURCE", "TOTAL", "RESERVED", "ALLOCATABLE", "ALLOCATED", "FREE"]
    assert lines[1].split() == ["0", "hugepages-2Mi", "128MiB", "0", "128MiB", "64MiB", "64MiB"]
    assert lines[2].split() == ["0", "memory", "4GiB", "256MiB", "3.8GiB", "3.5GiB", "256MiB"]
    assert lines[3].split() == ["1", "hugepages-1Gi", "1GiB", "1GiB", "0", "0", "0"]
    assert "  u1 app: memory 512MiB on NUMA 0; hugepages-2Mi 64MiB on NUMA 0" in lines
    assert "  u2 big: memory 5GiB on NUMA 0,1 (0=3GiB, 1=2GiB)" in lines


def test_a_daemon_without_the_memory_manager_or_no_daemon_is_one_line(short_tmp, capsys):
    rc, out = _ask(short_tmp, capsys, ["memory"], memory=False)
    assert rc == 2 and "the memory manager does not run in this daemon" in out.err
    rc = main(["memory", "--root-dir", str(short_tmp / "nowhere")])
    assert rc == 2 and "no running daemon to ask" in capsys.readouterr().err
