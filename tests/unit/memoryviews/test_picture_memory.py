"""The picture shows each pod's memory per NUMA node: the overlay carries the
memory manager's blocks split per node (from a file, or from the running
daemon's status socket), and each NUMA node's box says what is placed on it
and, in its tooltip, which pod and container holds it."""

from __future__ import annotations

import asyncio
import json
import logging
import xml.etree.ElementTree as ET

from agent.cli import main
from agent.config import section_defaults
from agent.contracts import MEMORY_MANAGER, DaemonContext
from agent.status.component import StatusComponent
from agent.status.live import from_daemon
from agent.topology.model import synthetic
from agent.topology.overlay import MemoryMark, Overlay
from tests.unit.memoryviews.fake import GI, MI, two_nodes
from tests.unit.topology.fake_sysfs import FakeMachine

SVG = "{http://www.w3.org/2000/svg}"


def _numa_boxes(svg: str) -> dict[int, tuple[str, str]]:
    """NUMA node -> (its head text, its tooltip)."""
    out = {}
    for g in ET.fromstring(svg).iter(f"{SVG}g"):
        if g.get("class") == "box numa":
            title = g.find(f"{SVG}title")
            out[int(g.get("data-numa"))] = (g.find(f"{SVG}text").text, title.text if title is not None else "")
    return out


def test_an_overlay_file_puts_each_pods_memory_on_its_nodes(tmp_path, capsys):
    m = FakeMachine(tmp_path / "m", packages=2, cores_per_package=2).build()
    overlay = {"format": "hwagent-overlay/1", "memory": [
        {"pod": "ml/train", "container": "main", "resource": "memory", "numa": 1, "size": 512 * MI},
        {"pod": "ml/train", "container": "main", "resource": "hugepages-2Mi", "numa": 1, "size": 64 * MI},
        {"pod": "db/pg", "container": "pg", "resource": "memory", "numa": 1, "size": GI},
    ]}
    ov = tmp_path / "o.json"
    ov.write_text(json.dumps(overlay))
    out = tmp_path / "p.svg"
    assert main(["topology", "--sysfs-root", str(m.sys), "--format", "svg", "--overlay", str(ov), "-o", str(out)]) == 0
    boxes = _numa_boxes(out.read_text())
    assert "placed" not in boxes[0][0] and boxes[0][1].count("\n") == 0
    head, tip = boxes[1]
    assert head == "NUMA node 1  4 GiB; hugepages-2Mi 64 MiB, memory 1.5 GiB placed", head
    assert tip.splitlines()[1:] == ["db/pg pg: memory 1 GiB", "ml/train main: memory 512 MiB, hugepages-2Mi 64 MiB"]
    # the overlay's JSON round-trips, and a bad entry is a clear error
    assert Overlay.from_json(Overlay.from_json(overlay).to_json()).memory == Overlay.from_json(overlay).memory
    ov.write_text(json.dumps({"format": "hwagent-overlay/1", "memory": [{"pod": "a", "resource": "memory",
                                                                         "numa": -1, "size": 1}]}))
    assert main(["topology", "--sysfs-root", str(m.sys), "--format", "svg", "--overlay", str(ov)]) == 2
    assert "overlay entry does not parse" in capsys.readouterr().err


def test_the_running_daemons_memory_manager_is_read_into_the_overlay(short_tmp):
    async def go():
        ctx = DaemonContext(config=section_defaults(), root_dir=short_tmp, mode="standalone",
                            log=logging.getLogger("t"), topology=synthetic(sockets=2, numa_per_socket=1,
                                                                           cores_per_numa=2))
        ctx.publish(MEMORY_MANAGER, two_nodes())
        comp = StatusComponent()
        await comp.start(ctx)
        try:
            return await asyncio.get_running_loop().run_in_executor(
                None, lambda: from_daemon(None, str(short_tmp), metrics=False))
        finally:
            await comp.stop()

    ov = asyncio.run(go())
    assert set(ov.memory) == {
        MemoryMark("u1", "app", "memory", 0, 512 * MI), MemoryMark("u1", "app", "hugepages-2Mi", 0, 64 * MI),
        MemoryMark("u2", "big", "memory", 0, 3 * GI), MemoryMark("u2", "big", "memory", 1, 2 * GI)}
    assert "memory manager (live)" in ov.source
    # no daemon: noted, not fatal
    none = from_daemon(None, str(short_tmp / "nowhere"), metrics=False)
    assert none.memory == () and any("no memory per node" in n for n in none.notes)
