"""`hwagent cpus` against a checkpoint and against a live socket."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading

from agent.contracts import CPU_POLICY
from agent.cli import main
from agent.cpu.checkpoint import CheckpointStore
from agent.cpu.policy import DynamicPolicy, PolicyOptions
from agent.contracts.cpu import Request
from agent.cpu.qos import QOS_KEY
from agent.topology.sysfs import read_topology

from .common import component, make_ctx


def test_cpus_from_checkpoint(tmp_path, capsys):
    topo = read_topology()
    p = DynamicPolicy(topo, PolicyOptions())
    p.allocate(Request(pod_uid="u1", pod_namespace="ns", pod_name="web", container_name="c",
                       resource_requests={"cpu": 1}, annotations={QOS_KEY: "reclaimed_cores"}))  # fmt: skip
    CheckpointStore(tmp_path / "cpu").save(p.state)
    assert main(["cpus", "--root-dir", str(tmp_path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["allocations"][0]["pod"] == "web" and out["allocations"][0]["qos_level"] == "reclaimed_cores"
    assert out["allocations"][0]["cpus"] == str(p.state.pools["reclaim"])
    assert out["pools"]["reclaim"] == str(p.state.pools["reclaim"])
    assert main(["cpus", "--root-dir", str(tmp_path)]) == 0
    assert "ns/web" in capsys.readouterr().out
    (tmp_path / "cpu" / "cpu_plugin_state.json").write_text("{")
    assert main(["cpus", "--root-dir", str(tmp_path)]) == 2
    assert "accept_state_loss" in capsys.readouterr().err


def test_cpus_from_socket(tmp_path):
    topo = read_topology()
    (tmp_path / "cg").mkdir()
    (tmp_path / "cg" / "cgroup.controllers").write_text("cpuset\n")
    ctx = make_ctx(tmp_path / "root", topo, tmp_path / "cg")
    comp = component(ctx)
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    async def serve():
        await comp.start(ctx)
        await ctx.lookup(CPU_POLICY).allocate(
            Request(pod_uid="u9", pod_namespace="ns", pod_name="api", container_name="c", resource_requests={"cpu": 1})
        )
        ready.set()

    t = threading.Thread(target=lambda: (loop.run_until_complete(serve()), loop.run_forever()), daemon=True)
    t.start()
    try:
        assert ready.wait(30)
        out = subprocess.run(
            [sys.executable, "-m", "agent.cli", "cpus", "--socket", str(comp.socket_path), "--json"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data["pools"] is None
        assert [(a["pod"], a["container"]) for a in data["allocations"]] == [("api", "c")]
    finally:
        asyncio.run_coroutine_threadsafe(comp.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
