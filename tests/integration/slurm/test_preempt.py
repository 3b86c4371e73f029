"""Preemptible Slurm jobs suppressed, then requeued by Slurm, never killed by hwagent (issue 35 part 4).

The real peer: a slurmctld and three slurmds (Debian's slurm-wlm 22.05), each node in its
own network and UTS namespace, proctrack/cgroup and task/cgroup in a test-owned subtree
(tests/integration/slurm/cluster.py, cgroups.py), and a hwagent for node n1 with
``[slurm] preemptible_partitions = ["scavenger"]`` (tests/integration/slurm/jobagent.py).

Two changes to that cluster, made here: cores are allocated but not confined
(``ConstrainCores=no``, no task/affinity), as on a cluster that lets jobs share a node's
CPUs: a preemptible job can only take CPU time from its neighbour where they share CPUs;
and ``AuthInfo=cred_expire=5``, so a requeued job waits 6 s before it may start again
(Slurm's default is 121 s).

On n1 a protected job (partition ``test``, three spinning processes on two CPUs) runs beside a
preemptible one (partition ``scavenger``, ``--requeue``, two spinning processes). hwagent
must, in this order: give the preemptible job the reclaimed class (its processes in its own
cpu cgroup with ``cpu.shares`` 2, read back), cut its CFS quota when the protected job's
tasks keep waiting (read back, the job still running with no restart), then, the wait
persisting, hand it back through ``scontrol requeue``: Slurm's record shows ``Restarts=1``,
slurmctld logged the requeue request, and the job runs again on another node (n1 is filled
in the 6 s before it may start). The protected job runs on, untouched.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.cgroup_support import kill_and_remove_subtree, rmdir_cgroup_tree
from tests.integration.runtime.test_end_to_end import until
from tests.integration.slurm.cluster import SlurmCluster, SlurmNode, missing_binaries, owned_cgroups
from tests.integration.slurm.jobagent import JobAgent
from tests.integration.slurm.netns import node_network

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(bool(missing_binaries()),
                       reason=f"no {', '.join(missing_binaries())}: scripts/setup.sh test installs slurm-wlm and munge"),
]

NAMES = ["n1", "n2", "n3"]
CPU = Path("/sys/fs/cgroup/cpu")
SPIN = "for i in $(seq {n}); do (while :; do :; done) & done; wait"


class SharedCpuCluster(SlurmCluster):
    """The test cluster with a ``scavenger`` partition, cores not confined, a short cred_expire."""

    confine_cores = False

    def write_config(self) -> None:
        super().write_config()
        text = self.conf.read_text()
        text = re.sub(r"^(AuthInfo=.*)$", r"\1,cred_expire=5", text, flags=re.M)
        if not self.confine_cores:
            text = text.replace("TaskPlugin=task/cgroup,task/affinity", "TaskPlugin=task/cgroup")
        text += "PartitionName=scavenger Nodes=ALL MaxTime=INFINITE State=UP\n"
        self.conf.write_text(text)
        if not self.confine_cores:
            cg = self.base / "etc" / "cgroup.conf"
            cg.write_text(cg.read_text().replace("ConstrainCores=yes", "ConstrainCores=no"))


class ConfinedCluster(SharedCpuCluster):
    """Cores confined (the harness's ConstrainCores=yes): each job on its own cores."""

    confine_cores = True


@contextmanager
def cluster(base: Path, fields: str, kind: type[SharedCpuCluster] = SharedCpuCluster) -> Iterator[SlurmCluster]:
    with node_network(NAMES) as net:
        nodes = tuple(SlurmNode(n.name, fields, n.addr, n) for n in net.nodes)
        c = kind(base, nodes, controller_addr=net.controller_addr, cgroups=owned_cgroups(base))
        try:
            c.start()
            yield c
        finally:
            subprocess.run(["scancel", "--full", "-u", "root"], env=c.env, capture_output=True, timeout=30)
            time.sleep(1)
            c.stop()
            # hwagent's cpu cgroups below the test's subtree, once the jobs' processes are gone
            if c.cgroups is not None and (CPU / c.cgroups.tag).exists():
                rmdir_cgroup_tree(CPU / c.cgroups.tag)


@contextmanager
def preempting_agent(base: Path, c: SlurmCluster, node: str, keys: str) -> Iterator[JobAgent]:
    """The Slurm jobs agent of node ``node`` with the preemption keys added to its [slurm] section."""
    agent = JobAgent(base, c, node)
    # [slurm] is the config's last section: the keys land there
    agent.config.write_text(agent.config.read_text() + keys)
    try:
        agent.start()
        yield agent
    finally:
        agent.stop()
        kill_and_remove_subtree(agent.subtree)


def _node_fields(tmp: Path) -> str:
    cfg = tmp / "empty.toml"
    cfg.write_text("")
    r = subprocess.run([sys.executable, "-m", "agent", "slurm", "conf", "--only", "node", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().split(" ", 1)[1]


def _job(c: SlurmCluster, job: str) -> dict[str, str]:
    out = c.run(["scontrol", "show", "job", "-o", job]).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


def _sbatch(c: SlurmCluster, *args: str) -> str:
    r = c.run(["sbatch", "--parsable", "-o", "/dev/null", *args])
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().split(";")[0]


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def test_a_preemptible_job_is_suppressed_then_requeued_by_slurm_never_killed(short_tmp_path):
    fields = _node_fields(short_tmp_path)
    with cluster(short_tmp_path / "slurm", fields) as c:
        c.wait_registered()
        _suppressed_then_requeued(c)


def _suppressed_then_requeued(c: SlurmCluster) -> None:
    assert c.cgroups is not None
    short_tmp_path = c.base.parent
    keys = ('preemptible_partitions = ["scavenger"]\npreempt_threshold = 0.3\n'
            "preempt_suppress_after_s = 2\npreempt_requeue_after_s = 6\npreempt_relax_after_s = 60\n"
            "preempt_quota_cpus = 0.05\n")
    with preempting_agent(short_tmp_path / "hw", c, "n1", keys) as hw:
        protected = _sbatch(c, "-p", "test", "-w", "n1", "-c", "1", "-J", "latency", "--wrap", SPIN.format(n=3))
        until(lambda: _job(c, protected).get("JobState") == "RUNNING", "the protected job to run")
        victim = _sbatch(c, "-p", "scavenger", "-c", "1", "--requeue", "-J", "scavenge",
                         "--wrap", SPIN.format(n=2))
        until(lambda: _job(c, victim).get("JobState") == "RUNNING", "the preemptible job to run")
        assert _job(c, victim)["NodeList"] == "n1", _job(c, victim)  # best fit: beside the protected job

        # 1. the class: its processes in hwagent's own cpu cgroup, cpu.shares 2
        mine = CPU / c.cgroups.tag / "hwagent_slurm_n1" / f"job_{victim}"
        until(lambda: _read(mine / "cpu.shares") == "2" and _read(mine / "cgroup.procs"),
              "the preemptible job's processes in a low-shares cpu cgroup", hw.daemon)
        assert _read(mine.parent / "cpu.shares") == "2"
        slurm_job = c.cgroups.subtree("freezer") / "slurm_n1" / "uid_0" / f"job_{victim}"
        moved = set(_read(mine / "cgroup.procs").split())
        slurm_procs = {p for d in slurm_job.rglob("cgroup.procs") for p in d.read_text().split()}
        assert moved and moved <= slurm_procs  # Slurm's own cgroups still hold them
        # the protected job is not touched
        assert not (CPU / c.cgroups.tag / "hwagent_slurm_n1" / f"job_{protected}").exists()

        # 2. suppressed before anything else: the quota cut, the job still running, no restart
        until(lambda: _read(mine / "cpu.cfs_quota_us") == "5000", "the preemptible job's quota cut", hw.daemon)
        record = _job(c, victim)
        assert record["JobState"] == "RUNNING" and record["Restarts"] == "0", record
        assert _read(mine / "cpu.cfs_period_us") == "100000"

        # 3. the wait persists: Slurm requeues it (hwagent asked), it waits out cred_expire
        until(lambda: _job(c, victim).get("Restarts") == "1", "Slurm to requeue the preemptible job", hw.daemon)
        # fill n1 while the requeued job may not start yet, so Slurm places it elsewhere
        _sbatch(c, "-p", "test", "-w", "n1", "-c", "1", "-J", "filler", "--wrap", "sleep 300")
        until(lambda: _job(c, victim).get("JobState") == "RUNNING", "the requeued job to run again")
        again = _job(c, victim)
        assert again["Restarts"] == "1" and again["NodeList"] in ("n2", "n3"), again
        assert again["Requeue"] == "1"
        # Slurm ended the first run on its own request path, the one `scontrol requeue` takes
        log = c.log("slurmctld")
        assert re.search(rf"Requeuing JobId={victim}\b", log), log[-3000:]
        # hwagent's decisions, in order: suppress, then requeue of this job (and nothing else of its own)
        decisions = re.findall(r'msg="slurm preempt decision" action=(\w+) .*? jobs="?([\d,]*)"?', hw.daemon.log())
        acted = [(a, j) for a, j in decisions if a not in ("hold", "idle")]
        assert acted[:2] == [("suppress", ""), ("requeue", victim)], acted
        counted = {lb["action"]: v for lb, v in hw.metrics().get("hwagent_slurm_preempt_actions_total", [])}
        assert counted.get("suppress", 0) >= 1 and counted.get("requeue", 0) == 1, counted
        # the protected job ran on throughout, and hwagent's cgroup of the gone run is removed
        assert _job(c, protected)["JobState"] == "RUNNING"
        until(lambda: not mine.exists(), "hwagent's cpu cgroup of the requeued run to go", hw.daemon)


def test_a_job_slurm_will_not_requeue_keeps_running_suppressed(short_tmp_path):
    """``--no-requeue``: Slurm refuses hwagent's ``scontrol requeue``; the job must run on, held to
    its quota, its processes alive: hwagent has no other way to end it and takes none. Then hwagent
    is killed -9 and restarted: nothing of the job is disturbed, and the quota needs no memory."""
    fields = _node_fields(short_tmp_path)
    with cluster(short_tmp_path / "slurm", fields) as c:
        c.wait_registered()
        assert c.cgroups is not None
        keys = ('preemptible_partitions = ["scavenger"]\npreempt_threshold = 0.3\n'
                "preempt_suppress_after_s = 1\npreempt_requeue_after_s = 2\npreempt_quota_cpus = 0.05\n")
        with preempting_agent(short_tmp_path / "hw", c, "n1", keys) as hw:
            _sbatch(c, "-p", "test", "-w", "n1", "-c", "1", "-J", "latency", "--wrap", SPIN.format(n=3))
            job = _sbatch(c, "-p", "scavenger", "-w", "n1", "-c", "1", "--no-requeue", "-J", "stay",
                          "--wrap", SPIN.format(n=2))
            until(lambda: _job(c, job).get("JobState") == "RUNNING", "the preemptible job to run")
            mine = CPU / c.cgroups.tag / "hwagent_slurm_n1" / f"job_{job}"
            until(lambda: _read(mine / "cpu.cfs_quota_us") == "5000", "the quota cut", hw.daemon)
            until(lambda: "slurm refused to take a preemptible job back" in hw.daemon.log(),
                  "hwagent's requeue to be refused", hw.daemon)
            pids = set(_read(mine / "cgroup.procs").split())
            time.sleep(3)
            record = _job(c, job)
            assert record["JobState"] == "RUNNING" and record["Restarts"] == "0" and record["Requeue"] == "0"
            assert pids and all(Path(f"/proc/{p}").exists() for p in pids)
            assert _read(mine / "cpu.cfs_quota_us") == "5000"
            assert f"Requeuing JobId={job}" not in c.log("slurmctld")
            refused = [ln for ln in hw.daemon.log().splitlines() if "slurm refused" in ln]
            assert f"job={job}" in refused[0] and "disabled" in refused[0].lower(), refused
            # hwagent killed -9 mid-suppression: the job runs on, the quota stays until a hwagent lifts it;
            # the restarted one keeps no memory of it, lifts it at its first interval, then cuts it again
            hw.kill()
            assert _job(c, job)["JobState"] == "RUNNING" and _read(mine / "cpu.cfs_quota_us") == "5000"
            hw.start()
            until(lambda: _read(mine / "cpu.cfs_quota_us") == "-1", "the restarted hwagent to lift the quota",
                  hw.daemon)
            until(lambda: _read(mine / "cpu.cfs_quota_us") == "5000", "the quota cut again", hw.daemon)
            assert _job(c, job)["Restarts"] == "0" and all(Path(f"/proc/{p}").exists() for p in pids)


def test_cancel_with_a_signal_lets_the_job_end_itself(short_tmp_path):
    """``preempt_action = "cancel"`` with ``preempt_cancel_signal = "USR1"``: hwagent asks Slurm
    (``scancel --signal=USR1 --full``), Slurm delivers USR1 to the batch script, which traps it,
    leaves a mark and exits 0: the job completes on its own terms, not cancelled, not requeued."""
    fields = _node_fields(short_tmp_path)
    mark = short_tmp_path / "usr1"
    with cluster(short_tmp_path / "slurm", fields) as c:
        c.wait_registered()
        assert c.cgroups is not None
        keys = ('preemptible_partitions = ["scavenger"]\npreempt_threshold = 0.3\n'
                "preempt_suppress_after_s = 1\npreempt_requeue_after_s = 2\npreempt_quota_cpus = 0.05\n"
                'preempt_action = "cancel"\npreempt_cancel_signal = "USR1"\n')
        with preempting_agent(short_tmp_path / "hw", c, "n1", keys) as hw:
            _sbatch(c, "-p", "test", "-w", "n1", "-c", "1", "-J", "latency", "--wrap", SPIN.format(n=3))
            script = f"trap 'echo checkpointed > {mark}; exit 0' USR1; " + SPIN.format(n=2)
            job = _sbatch(c, "-p", "scavenger", "-w", "n1", "-c", "1", "-J", "ends", "--wrap", script)
            until(lambda: _job(c, job).get("JobState") == "COMPLETED", "the job to end on USR1", hw.daemon)
            assert mark.read_text().strip() == "checkpointed"
            record = _job(c, job)
            assert record["ExitCode"] == "0:0" and record["Restarts"] == "0", record
            acted = re.findall(r'msg="slurm preempt decision" action=(suppress|cancel)', hw.daemon.log())
            assert acted[:2] == ["suppress", "cancel"], acted


def test_a_protected_job_waiting_on_its_own_cores_leaves_preemptible_jobs_alone(short_tmp_path):
    """Cores confined: the protected job has one core and runs three spinners on it (its own wait,
    however long), the preemptible job has the other core. Nothing the preemptible job does makes the
    protected one wait, so it must keep its class only: no quota, no requeue, ever. (A user running
    a protected job must not be able to get other users' preemptible jobs requeued by oversubscribing
    their own cores.)"""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two CPUs: one per job")
    fields = _node_fields(short_tmp_path)
    with cluster(short_tmp_path / "slurm", fields, ConfinedCluster) as c:
        c.wait_registered()
        assert c.cgroups is not None
        keys = ('preemptible_partitions = ["scavenger"]\npreempt_threshold = 0.3\n'
                "preempt_suppress_after_s = 1\npreempt_requeue_after_s = 2\npreempt_quota_cpus = 0.05\n")
        with preempting_agent(short_tmp_path / "hw", c, "n1", keys) as hw:
            protected = _sbatch(c, "-p", "test", "-w", "n1", "-c", "1", "-J", "latency", "--wrap", SPIN.format(n=3))
            job = _sbatch(c, "-p", "scavenger", "-w", "n1", "-c", "1", "--requeue", "-J", "apart",
                          "--wrap", SPIN.format(n=2))
            until(lambda: _job(c, job).get("JobState") == "RUNNING", "the preemptible job to run")
            def job_cpus() -> dict[str, str]:
                return {j: _read(c.cgroups.subtree("cpuset") / "slurm_n1" / "uid_0" / f"job_{j}" / "cpuset.cpus")
                        for j in (protected, job)}
            # RUNNING comes before slurmstepd has written the job's cpuset (read '' once under load)
            until(lambda: all(job_cpus().values()), "both jobs' cpusets written by task/cgroup")
            cpus = job_cpus()
            assert cpus[protected] and cpus[job] and cpus[protected] != cpus[job], cpus  # one core each
            mine = CPU / c.cgroups.tag / "hwagent_slurm_n1" / f"job_{job}"
            until(lambda: _read(mine / "cpu.shares") == "2", "the preemptible job's class", hw.daemon)
            time.sleep(8)  # suppress_after + requeue_after, four times over
            acted = re.findall(r'msg="slurm preempt decision" action=(suppress|requeue)', hw.daemon.log())
            record = _job(c, job)
            assert acted == [] and record["Restarts"] == "0", (acted, record.get("Restarts"))
            assert record["JobState"] == "RUNNING" and _read(mine / "cpu.cfs_quota_us") == "-1"
