"""`hwagent run` + `hwagent launch` + `ps` + `kill -9` + restart + `stop`, as a user
would, on this machine's real topology and cgroups (a test-owned workload subtree)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.integration.daemon.test_lifecycle import Daemon
from tests.cgroup_support import kill_and_remove_subtree

pytestmark = pytest.mark.timeout(300)

HWAGENT = Path(sys.executable).parent / "hwagent"
BUDGET_S = 90  # two shared cores under a full suite: generous, never a timing assertion


def cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(HWAGENT), args[0], "--root-dir", str(root), *args[1:]], capture_output=True,
                          text=True, timeout=BUDGET_S)


def until(cond, what: str, daemon: Daemon | None = None):
    deadline = time.monotonic() + BUDGET_S
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        if daemon is not None and daemon.proc.poll() is not None:
            raise AssertionError(f"daemon exited ({daemon.proc.returncode}) while waiting for {what}:\n{daemon.log()}")
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def pod(root: Path, name: str) -> dict | None:
    r = cli(root, "ps", "--format", "json")
    if r.returncode != 0:
        return None
    return next((p for p in json.loads(r.stdout)["pods"] if p["name"] == name), None)


def status_field(pid: int, key: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    raise KeyError(key)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()


@pytest.fixture
def subtree():
    name = f"/hwagent-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    yield name
    kill_and_remove_subtree(name)


def test_launch_runs_pinned_survives_kill9_and_stop_leaves_nothing(tmp_path, subtree):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    cfg = tmp_path / "hwagent.toml"
    cfg.write_text(f'[pressure]\nenabled = false\n[devices]\nenabled = false\n'
                   f'[runtime]\ncgroup_subtree = "{subtree}"\n')
    root = tmp_path / "root"
    daemons: list[Daemon] = []

    def start(n: int) -> Daemon:
        d = Daemon(tmp_path / f"d{n}", "--config", str(cfg), "--root-dir", str(root))
        daemons.append(d)
        until(lambda: "hwagent ready" in d.log(), "the daemon to be ready", d)
        return d

    try:
        d = start(1)
        r = cli(root, "launch", "--name", "hog", "--cpus", "1", "--qos", "dedicated", "--numa-binding", "--",
                "sh", "-c", "while :; do :; done")
        assert r.returncode == 0, r.stderr
        p = until(lambda: (q := pod(root, "hog")) and q["phase"] == "Running" and q["containers"][0]["pid"] and q,
                  "the pod to run", d)
        ctr = p["containers"][0]
        pid = ctr["pid"]
        # pinned: what the workload's kernel task says is what admission decided
        assert status_field(pid, "Cpus_allowed_list") == ",".join(map(str, ctr["cpu_ids"]))
        assert status_field(pid, "Mems_allowed_list") == ",".join(map(str, ctr["mems"]))
        cg = Path(f"/proc/{pid}/cgroup").read_text()
        assert f"cpuset:{subtree}/pod{p['uid']}/main" in cg
        # kill -9 of the daemon: the workload keeps running
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(30)
        time.sleep(0.5)
        assert alive(pid)
        d = start(2)
        p = until(lambda: (q := pod(root, "hog")) and q["phase"] == "Running" and q, "the pod after the restart", d)
        assert p["containers"][0]["pid"] == pid and alive(pid)
        assert 'msg="pod restored" pod=default/hog' in d.log()
        # stop: SIGTERM (sh dies of it), cgroups removed, resources released
        r = cli(root, "stop", "hog", "--grace", "5")
        assert r.returncode == 0, r.stderr
        p = pod(root, "hog")
        assert p["phase"] == "Failed" and p["reason"] == "Stopped" and p["released"], p
        assert not alive(pid)
        left = [c for c in Path("/sys/fs/cgroup").iterdir() if (c / subtree.lstrip("/") / f"pod{p['uid']}").exists()]
        assert left == []
        assert not (root / "runtime" / p["uid"]).exists()
        cpus = cli(root, "cpus", "--format", "json")
        assert cpus.returncode == 0 and p["uid"] not in cpus.stdout
        assert d.stop() == 0
    finally:
        for d in daemons:
            d.cleanup()


@pytest.mark.slow
def test_reclaimed_pod_is_evicted_for_real_under_cpu_pressure(tmp_path, subtree):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    pytest.importorskip("bcc")
    cfg = tmp_path / "hwagent.toml"
    cfg.write_text("[pressure]\ninterval_s = 0.5\nwindow_s = 2.0\nsoft_threshold = 0.3\nhard_threshold = 0.6\n"
                   "met_fraction = 0.75\nnetdev = false\niommu = false\nthermal = false\nblockio = false\n"
                   f"irq = false\n[devices]\nenabled = false\n[runtime]\ncgroup_subtree = \"{subtree}\"\n")
    root = tmp_path / "root"
    d = Daemon(tmp_path / "d", "--config", str(cfg), "--root-dir", str(root))
    try:
        until(lambda: "hwagent ready" in d.log(), "the daemon to be ready", d)
        hogs = 2 * (os.cpu_count() or 1) + 2
        r = cli(root, "launch", "--name", "rec", "--qos", "reclaimed", "--cpu-request", "100m", "--",
                "sh", "-c", f"i=0; while [ $i -lt {hogs} ]; do (while :; do :; done) & i=$((i+1)); done; wait")
        assert r.returncode == 0, r.stderr
        p = until(lambda: (q := pod(root, "rec")) and q["phase"] == "Failed" and q, "the eviction", d)
        assert p["reason"] == "Evicted" and "cpu_pressure" in p["message"], p
        # the registry records the terminal status first, then admission releases the pod's resources
        p = until(lambda: (q := pod(root, "rec")) and q["released"] and q, "the release after the eviction", d)
        assert p["phase"] == "Failed" and p["reason"] == "Evicted", p
        records = [json.loads(line) for line in (root / "pressure" / "evictions.jsonl").read_text().splitlines()]
        assert [r["pod_uid"] for r in records] == [p["uid"]]
        assert records[0]["outcome"]["via"] == "runtime"
        left = [c for c in Path("/sys/fs/cgroup").iterdir() if (c / subtree.lstrip("/") / f"pod{p['uid']}").exists()]
        assert left == []
        assert d.stop() == 0
    finally:
        d.cleanup()
