"""Slurm's cgroup v2 layout, read by hwagent on a real v2 kernel: the VM tier's v2 guest (issue 35).

The host is hybrid v1 (Slurm's tree ``slurm_<node>/uid_<u>/job_<j>/step_<s>``); the v2 tree,
``system.slice/<node>_slurmstepd.scope/job_<j>/step_<s>/{slurm,user/task_<t>}``, exists only
on a v2 kernel. In the numa2 guest (cgroup v2 at /sys/fs/cgroup, no systemd) one slurmctld and
one slurmd of Debian's slurm-wlm 22.05 run with ``proctrack/cgroup`` and ``task/cgroup``,
``CgroupPlugin=cgroup/v2`` (tests/integration/slurm/cluster.py's cluster with the v2
``cgroup.conf`` of ``V2SlurmCgroups`` below).

What 22.05's cgroup/v2 plugin needs (src/plugins/cgroup/v2/cgroup_v2.c): slurmd's own cgroup
(its ``0::`` line) as the delegated root, and a scope for the steps,
``<CgroupMountpoint>/system.slice/<node>_slurmstepd.scope`` (Debian builds for several slurmd
per host, hence the node prefix), which it asks systemd for over D-Bus unless
``IgnoreSystemd=yes``: then it makes the directory itself, enables the controllers down to
it (``CgroupAutomount=yes``) and, not started by systemd (no ``INVOCATION_ID``), moves slurmd
into ``<scope>/slurmd``. So no systemd is needed; the whole guest is test-owned, and the scope
is removed after.

hwagent's ``[slurm]`` component on that node must name the step by job, step, user and
partition in its metrics and ``hwagent ps``, and give a preemptible job's own cgroup
``cpu.idle`` 1 (read back), writing nothing of Slurm's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.daemon.test_lifecycle import HWAGENT, Daemon
from tests.integration.slurm.cgroups import SlurmCgroups
from tests.integration.slurm.cluster import SlurmCluster, SlurmNode, missing_binaries
from tests.integration.slurm.jobagent import JobAgent
from tests.vm.guest.v2_support import CGROUP2, budget, keep_artifacts, skip_unless_named_here, wait_until

#: TCG runs slurmctld, slurmd and the daemon ~10x slower than the host: the waits inside are calibrated
pytestmark = [pytest.mark.root, pytest.mark.timeout(1200)]

_SKIP = skip_unless_named_here(__file__) or (
    f"no {', '.join(missing_binaries())}: scripts/setup.sh test installs slurm-wlm and munge"
    if missing_binaries() else None)
if _SKIP:
    pytestmark.append(pytest.mark.skip(reason=_SKIP))


class V2SlurmCgroups(SlurmCgroups):
    """22.05's cgroup/v2 plugin on the guest's unified hierarchy, without systemd.

    Its tree is not relocatable as v1's is (the plugin roots it at slurmd's own cgroup and at
    ``system.slice`` under the mount point), so ``tag`` is "" (hwagent's ``cgroup_parent``: the
    hierarchy's root) and ``remove`` takes ``system.slice/<node>_slurmstepd.scope`` away once
    slurmd is gone; in the guest nothing else uses ``system.slice``."""

    def __init__(self, node: str, links: Path) -> None:
        super().__init__("", links, CGROUP2)
        self.node = node

    @property
    def scope(self) -> Path:
        """The steps' scope: ``<node>_slurmstepd.scope`` (Debian builds slurmd for several per host)."""
        return CGROUP2 / "system.slice" / f"{self.node}_slurmstepd.scope"

    def create(self) -> None:
        """``system.slice`` and the steps' scope, as systemd makes them on a node: 22.05 with
        ``IgnoreSystemd=yes`` makes the scope but not the slice ("Could not create scope directory
        /sys/fs/cgroup/system.slice/<node>_slurmstepd.scope: No such file or directory"), and it
        splits ``cgroup.controllers`` on spaces only, so the last name keeps its newline and is
        missed: with the three controllers it enables itself, memory is last and every slurmstepd
        fails "Controller memory is not enabled!" ... "cannot create task context for task/cgroup".
        systemd's slice and a ``Delegate=yes`` scope carry ``io`` and ``pids`` too, after memory;
        so do these (docs/slurm.md, "In the VM tier's multi-NUMA guests")."""
        self.links.mkdir(parents=True, exist_ok=True)
        for d in (self.scope.parent, self.scope):
            d.mkdir(exist_ok=True)
            (d / "cgroup.subtree_control").write_text("+cpuset +cpu +io +memory +pids")

    def cgroup_conf(self) -> str:
        return "\n".join([
            "CgroupPlugin=cgroup/v2",
            f"CgroupMountpoint={CGROUP2}",
            "CgroupAutomount=yes",
            "IgnoreSystemd=yes",
            "ConstrainCores=yes",
            "ConstrainRAMSpace=yes",
        ]) + "\n"

    def dirs(self) -> list[Path]:
        if not self.scope.is_dir():
            return []
        return [Path(root) for root, _d, _f in os.walk(self.scope, topdown=False)]

    def remove(self, timeout: float = 10.0) -> list[str]:
        left = super().remove(timeout)
        slice_dir = self.scope.parent
        try:
            slice_dir.rmdir()
        except OSError:
            pass
        return left


#: the guest's one non-loopback interface while the test runs (a dummy link of the test's own)
DUMMY = "hwslv2"
DUMMY_ADDR = "192.0.2.10/24"


def setup_network() -> None:
    """Give the guest an address besides loopback. Slurm 22.05 resolves its listening address
    with ``getaddrinfo(NULL, port, AI_PASSIVE | AI_ADDRCONFIG)`` (src/common/util-net.c), and
    AI_ADDRCONFIG answers nothing on a machine whose only interface is ``lo`` (the tier boots
    with ``-nic none``): slurmctld exits with "Unable to resolve (null)" ... "Address family
    not supported by protocol". A dummy interface with a documentation address is enough (the
    guest's virtio NICs are other tests' devices)."""
    teardown_network()
    # explicitly: the kernel's own module request runs the initramfs's modprobe, which has no modules
    for argv in (["modprobe", "dummy"], ["ip", "link", "add", DUMMY, "type", "dummy"], ["ip", "addr", "add", DUMMY_ADDR, "dev", DUMMY],
                 ["ip", "link", "set", DUMMY, "up"]):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"{' '.join(argv)}: {r.stderr}"


def teardown_network() -> None:
    subprocess.run(["ip", "link", "del", DUMMY], capture_output=True, timeout=60)


def _node_line(tmp: Path) -> str:
    cfg = tmp / "empty.toml"
    cfg.write_text("")
    r = subprocess.run([sys.executable, "-m", "agent", "slurm", "conf", "--only", "node", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=budget(60))
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


class PreemptCluster(SlurmCluster):
    """The one-node v2 cluster with a ``scavenger`` partition beside ``test``, its waits scaled to the guest."""

    def _wait(self, ready, what: str, timeout: float = 20.0) -> None:  # noqa: ANN001 - the base's signature
        super()._wait(ready, what, budget(timeout))

    def write_config(self) -> None:
        super().write_config()
        with self.conf.open("a") as f:
            f.write("PartitionName=scavenger Nodes=ALL MaxTime=INFINITE State=UP\nDebugFlags=CGROUP\n")
        # what the plugin starts from, beside its logs (the guest is gone when they are read)
        (self.base / "log" / "cgroups-at-start.txt").write_text("".join(
            f"{p}: {_read(Path(p))}\n" for p in ("/proc/self/cgroup", f"{CGROUP2}/cgroup.controllers",
                                                  f"{CGROUP2}/cgroup.subtree_control",
                                                  f"{CGROUP2}/system.slice/cgroup.controllers")))

    def stepd_failed(self) -> str | None:
        """slurmstepd's own words when it could not set a job up (it then ends the job)."""
        log = self.log("slurmd")
        return f"slurmstepd failed:\n{log[-3000:]}" if "exiting abnormally" in log else None


@pytest.fixture
def v2_cluster() -> Iterator[SlurmCluster]:
    base = Path(tempfile.mkdtemp(prefix="slv2-", dir="/tmp"))
    base.chmod(0o755)
    name, _, fields = _node_line(base).removeprefix("NodeName=").partition(" ")
    setup_network()
    c = PreemptCluster(base / "slurm", (SlurmNode(name, fields),), cgroups=V2SlurmCgroups(name, base / "cg"))
    try:
        c.start()
        c.wait_registered(timeout=30)
        yield c
    finally:
        subprocess.run(["scancel", "--full", "-u", "root"], env=c.env, capture_output=True, timeout=budget(30))
        c.stop()
        keep_artifacts("slurm", [*(base / "slurm" / "log").glob("*"), base / "hw" / "d" / "stderr.log"])
        teardown_network()
        shutil.rmtree(base, ignore_errors=True)


def _start_agent(c: SlurmCluster, base: Path, keys: str) -> JobAgent:
    agent = JobAgent(base, c, c.node_name)
    agent.config.write_text(agent.config.read_text() + keys)  # [slurm] is its last section
    agent.daemon = d = Daemon(base / "d", "--config", str(agent.config), "--metrics-address",
                              f"127.0.0.1:{agent.port}")
    wait_until("the daemon to be ready", lambda: "hwagent ready" in d.log(), 30,
               lambda: None if d.proc.poll() is None else f"hwagent exited:\n{d.log()[-3000:]}")
    return agent


def _sbatch(c: SlurmCluster, *args: str) -> str:
    r = c.run(["sbatch", "--parsable", "-o", "/dev/null", *args], timeout=budget(30))
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().split(";")[0]


def _state(c: SlurmCluster, job: str) -> str:
    out = c.run(["scontrol", "show", "job", "-o", job], timeout=budget(30)).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv).get("JobState", "")


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def test_v2_steps_named_in_metrics_and_ps_and_a_preemptible_job_gets_cpu_idle(v2_cluster: SlurmCluster) -> None:
    c = v2_cluster
    assert isinstance(c, PreemptCluster)
    assert isinstance(c.cgroups, V2SlurmCgroups)
    scope = c.cgroups.scope
    base = c.base.parent / "hw"
    agent = _start_agent(c, base, 'preemptible_partitions = ["scavenger"]\n')
    try:
        def alive() -> str | None:
            d = agent.daemon
            return None if d is None or d.proc.poll() is None else f"hwagent exited:\n{d.log()[-3000:]}"

        keep = _sbatch(c, "-p", "test", "-c", "1", "-J", "keep", "--wrap", "srun sleep 600")
        spare = _sbatch(c, "-p", "scavenger", "-c", "1", "-J", "spare", "--wrap", "srun sleep 600")
        for job in (keep, spare):
            wait_until(f"job {job} running", lambda job=job: _state(c, job) == "RUNNING", 20, c.stepd_failed)

        # Slurm's own v2 tree on the real kernel: the scope, the job, its steps, the task below user/
        for job in (keep, spare):
            task = scope / f"job_{job}" / "step_0" / "user" / "task_0"

            def runs_sleep(task: Path = task) -> bool:
                """The task's process is in its cgroup and has exec'd (slurmstepd forks it first)."""
                return any(_read(Path(f"/proc/{p}/comm")) == "sleep" for p in _read(task / "cgroup.procs").split())

            wait_until(f"job {job}'s step 0 task running sleep in its cgroup", runs_sleep, 20, c.stepd_failed,
                       show=lambda task=task: {p: _read(Path(f"/proc/{p}/comm"))
                                               for p in _read(task / "cgroup.procs").split()})
            assert (scope / f"job_{job}" / "step_batch").is_dir()

        # hwagent names each step by job, step, user and partition, as Slurm has them
        want = {(keep, "0", "root", "test"), (spare, "0", "root", "scavenger"),
                (keep, "batch", "root", "test"), (spare, "batch", "root", "scavenger")}
        wait_until("hwagent to name every step", lambda: want <= agent.named_steps(), 10, alive,
                   show=agent.named_steps)
        assert agent.series("hwagent_slurm_step_memory_bytes")[(keep, "0", "root", "test")] > 0
        ps = subprocess.run([str(HWAGENT), "ps", "--root-dir", str(agent.daemon.root)], capture_output=True,
                            text=True, timeout=budget(60))
        assert ps.returncode == 0, ps.stderr
        for job, part in ((keep, "test"), (spare, "scavenger")):
            line = next((ln for ln in ps.stdout.splitlines() if f"job_{job}" in ln), "")
            assert part in line and "root" in line, ps.stdout

        # the preemptible job's own cgroup (Slurm's) gets cpu.idle 1; the protected one's stays 0
        wait_until("the preemptible job's cgroup idle", lambda: _read(scope / f"job_{spare}" / "cpu.idle") == "1",
                   10, alive)
        assert _read(scope / f"job_{keep}" / "cpu.idle") == "0"
        assert _read(scope / f"job_{spare}" / "cpu.max").startswith("max ")  # no quota: not under pressure
    finally:
        agent.stop()
