"""The product's main job, as a user does it on this machine: `hwagent run` (standalone, the
embedded default but for a test-owned cgroup subtree), then from other processes `hwagent
launch --cpus 1 --qos dedicated -- <a CPU hog>`: the hog runs pinned to the CPU it was
given, shows in `hwagent ps`, survives kill -9 of the daemon and its restart (same process,
same CPU), and `hwagent stop` leaves nothing behind: no process, no cgroup under the
runtime's subtree in any hierarchy, no CPU allocation, nothing in pod-resources.

Everything is a separate process talking over the daemon's sockets (admission API, the CPU
plugin's QRM socket, pod-resources), on the real hybrid cgroups of this host (one NUMA
node; the 2-node proof is tests/vm/guest/test_workloads.py).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

HWAGENT = Path(sys.executable).parent / "hwagent"
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: two shared cores under a full suite: generous budgets, never a timing assertion
BUDGET_S = 120.0
HOG = ["sh", "-c", "while :; do :; done"]


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (the runtime creates cgroups)"
    for mod in ("agent.workloads.server", "agent.runtime.runtime"):
        try:
            if importlib.util.find_spec(mod) is None:
                return f"{mod} is not on this branch"
        except ModuleNotFoundError:
            return f"{mod} is not on this branch"
    from agent.cli import COMMANDS

    missing = [c for c in ("launch", "ps", "stop", "rm") if f"agent.commands.{c}" not in COMMANDS]
    if missing:
        return f"CLI commands missing on this branch: {', '.join(missing)}"
    return None


def wait_for(cond: Callable[[], Any], what: str, node: Node, budget: float = BUDGET_S) -> Any:
    deadline = time.monotonic() + budget
    while True:
        got = cond()
        if got:
            return got
        if node.proc is not None and node.proc.poll() is not None:
            raise AssertionError(f"daemon exited ({node.proc.returncode}) while waiting for {what}\n{node.log_tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {budget:.0f}s\n{node.log_tail()}")
        time.sleep(0.1)


class Node:
    """One `hwagent run` with its root dir and config; the CLI and the APIs against it."""

    def __init__(self, base: Path, subtree: str) -> None:
        self.base = base
        self.root = base / "root"
        self.subtree = subtree
        self.config = base / "hwagent.toml"
        self.config.write_text(f"""
[daemon]
root_dir = "{self.root}"
mode = "standalone"
metrics_address = "127.0.0.1:0"

[pressure]
enabled = false

[devices]
enabled = false

[runtime]
cgroup_subtree = "{subtree}"
""")
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = self.base / f"daemon-{self.starts}.log"
        self.log = log
        with open(log, "wb") as f:
            self.proc = subprocess.Popen([str(HWAGENT), "run", "--config", str(self.config)], stdout=f,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        wait_for(lambda: b"hwagent ready" in log.read_bytes(), "daemon ready", self)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        rc = self.proc.wait(BUDGET_S)
        self.proc = None
        return rc

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except (OSError, AttributeError):
            return "(no daemon log)"

    def cli(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(HWAGENT), argv[0], "--root-dir", str(self.root), *argv[1:]],
                              capture_output=True, text=True, timeout=BUDGET_S)

    def ps(self) -> list[dict[str, Any]]:
        p = self.cli("ps", "--format", "json")
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)["pods"]

    def pod(self, name: str) -> dict[str, Any]:
        (pod,) = [p for p in self.ps() if p["name"] == name]
        return pod

    def pod_resources(self) -> dict[str, list[int]]:
        import grpc

        from agent.api.podresources.v1 import api_pb2 as pr
        from agent.api.podresources.v1 import api_pb2_grpc as pr_grpc

        with grpc.insecure_channel(f"unix://{self.root / 'pod-resources' / 'hwagent.sock'}") as ch:
            resp = pr_grpc.PodResourcesListerStub(ch).List(pr.ListPodResourcesRequest(), timeout=30)
        return {p.name: sorted(i for c in p.containers for i in c.cpu_ids) for p in resp.pod_resources}

    def cpu_allocations(self) -> dict[str, str]:
        """The CPU plugin's own allocation table, over its QRM socket (pod uid -> cpus)."""
        import grpc

        from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
        from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc

        async def get() -> Any:
            async with grpc.aio.insecure_channel(f"unix://{self.root / 'cpu' / 'qrm_cpu_plugin_dynamic.sock'}") as ch:
                return await pb_grpc.ResourcePluginStub(ch).GetResourcesAllocation(
                    pb.GetResourcesAllocationRequest(), timeout=30)

        resp = asyncio.run(get())
        return {uid: ",".join(r.resource_allocation["cpu"].allocation_result
                              for r in v.container_resources.values() if "cpu" in r.resource_allocation)
                for uid, v in resp.pod_resources.items()}

    def subtree_dirs(self) -> list[Path]:
        """Every cgroup directory under the runtime's subtree, in every hierarchy (the subtree itself excluded)."""
        out = []
        for base in self.subtree_roots():
            for p, _d, _f in os.walk(base):
                if Path(p) != base:
                    out.append(Path(p))
        return out

    def subtree_roots(self) -> list[Path]:
        rel = self.subtree.lstrip("/")
        return [p for p in (CGROUP_ROOT / rel, *CGROUP_ROOT.glob(f"*/{rel}")) if p.is_dir()]


@pytest.fixture
def node() -> Iterator[Node]:
    why = _skip_reason()
    if why:
        pytest.skip(why)
    subtree = f"/hwagent-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    n = Node(Path(tempfile.mkdtemp(prefix="hwe2e", dir="/tmp")), subtree)  # short: AF_UNIX paths
    try:
        yield n
    finally:
        if n.proc is not None and n.proc.poll() is None:
            n.proc.kill()
            n.proc.wait()
        _remove_subtree(n)
        shutil.rmtree(n.base, ignore_errors=True)


def _remove_subtree(n: Node) -> None:
    """Kill whatever a failed test left in the subtree and remove it from every hierarchy."""
    for base in n.subtree_roots():
        for p, _d, _f in sorted(os.walk(base), key=lambda t: -len(t[0])):
            try:
                for pid in Path(p, "cgroup.procs").read_text().split():
                    os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
    for base in n.subtree_roots():
        for p, _d, _f in sorted(os.walk(base), key=lambda t: -len(t[0])):
            for _ in range(100):
                try:
                    os.rmdir(p)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def test_launch_pins_survives_kill_9_and_stop_leaves_nothing(node: Node) -> None:
    node.start()
    online = os.sched_getaffinity(0)
    p = node.cli("launch", "--name", "hog", "--cpus", "1", "--qos", "dedicated", "--", *HOG)
    assert p.returncode == 0, f"launch rc {p.returncode}\n{p.stderr}\n{node.log_tail()}"
    assert p.stdout.startswith("admitted default/hog"), p.stdout

    pod = wait_for(lambda: (lambda q: q if q["phase"] == "Running" and q["containers"][0]["pid"] else None)(
        node.pod("hog")), "hog Running", node)
    (c,) = pod["containers"]
    pid, cpus, uid = c["pid"], set(c["cpu_ids"]), pod["uid"]
    assert len(cpus) == 1 and cpus <= online, c
    # the hog itself runs pinned there, in its own cgroup under the runtime's subtree
    assert os.sched_getaffinity(pid) == cpus
    cg = {ln.split(":", 2)[1]: ln.split(":", 2)[2] for ln in Path(f"/proc/{pid}/cgroup").read_text().splitlines()}
    own = cg.get("cpuset") or cg[""]
    assert own.startswith(node.subtree + "/"), cg
    assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:3] == [b"sh", b"-c", HOG[2].encode()]
    text = node.cli("ps").stdout
    assert "hog" in text and "Running" in text, text
    assert node.pod_resources() == {"hog": sorted(cpus)}
    assert set(node.cpu_allocations()) == {uid}

    # kill -9 of the daemon: the hog runs on; the restarted daemon re-attaches to the same process
    assert node.stop(signal.SIGKILL) == -signal.SIGKILL
    assert os.sched_getaffinity(pid) == cpus
    node.start()
    pod = wait_for(lambda: (lambda q: q if q["phase"] == "Running" else None)(node.pod("hog")), "hog restored", node)
    assert pod["uid"] == uid and pod["containers"][0]["pid"] == pid and set(pod["containers"][0]["cpu_ids"]) == cpus
    assert os.sched_getaffinity(pid) == cpus
    assert node.pod_resources() == {"hog": sorted(cpus)}
    assert set(node.cpu_allocations()) == {uid}

    # stop: the hog is gone, and so is everything it held
    p = node.cli("stop", "hog", "--grace", "5")
    assert p.returncode == 0, f"stop rc {p.returncode}\n{p.stderr}\n{node.log_tail()}"
    wait_for(lambda: node.pod("hog")["released"], "hog released", node)
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), "hog process gone", node)
    assert node.subtree_dirs() == []
    assert node.pod_resources() == {}
    assert node.cpu_allocations() == {}
    # rm forgets it; a clean daemon exit
    p = node.cli("rm", "hog")
    assert p.returncode == 0, p.stderr
    assert node.ps() == []
    assert node.stop() == 0
    assert "Traceback" not in node.log.read_text()
