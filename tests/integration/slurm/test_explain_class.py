"""A Slurm job explained, and a preemptible job shown as hwagent's reclaimed class (issue 35 part 2, part 4).

The real peer: a slurmctld and three slurmds (Debian's slurm-wlm 22.05), cores confined
(task/cgroup ``ConstrainCores=yes``: each job's step has a cpuset of its own), one hwagent for
node n1 with ``[slurm] preemptible_partitions = ["scavenger"]`` and a suppression that never
comes (so the class is all that differs). A user's protected job and a preemptible job run on n1:

- ``hwagent status`` and the pod directory (``hwagent ps --format json``) show the preemptible
  job as ``reclaimed`` and the protected one as ``shared`` (they said ``shared`` for both);
- ``hwagent explain job_<id>`` names the job, its user, its partition, its class and each
  step's CPUs as task/cgroup confined them (it said "nothing recorded about default/job_<id>").
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.daemon.test_lifecycle import HWAGENT
from tests.integration.runtime.test_end_to_end import until
from tests.integration.slurm.cluster import SlurmCluster, missing_binaries
from tests.integration.slurm.jobagent import JobAgent
from tests.integration.slurm.test_preempt import ConfinedCluster, _job, _node_fields, _read, cluster, preempting_agent

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(bool(missing_binaries()),
                       reason=f"no {', '.join(missing_binaries())}: scripts/setup.sh test installs slurm-wlm and munge"),
]

@pytest.fixture
def job_user() -> Iterator[str]:
    """A local user of the test's own (random name), removed with its home afterwards."""
    name = f"hwex{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "-m", name], check=True, capture_output=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True)


KEYS = 'preemptible_partitions = ["scavenger"]\npreempt_suppress_after_s = 3600\n'


def _sbatch_as(c: SlurmCluster, user: str | None, *args: str) -> str:
    pre = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={c.conf}"] if user else []
    r = subprocess.run([*pre, "sbatch", "--parsable", "-o", "/dev/null", *args], env=c.env, cwd="/",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().split(";")[0]


def _cli(hw, *args: str) -> subprocess.CompletedProcess[str]:
    assert hw.daemon is not None
    return subprocess.run([str(HWAGENT), *args, "--root-dir", str(hw.daemon.root)], capture_output=True, text=True,
                          timeout=60)


@contextmanager
def two_jobs(tmp: Path, user: str) -> Iterator[tuple[SlurmCluster, JobAgent, str, str]]:
    """The cluster, n1's hwagent, a protected job of ``user`` and a preemptible job of root's, both running on n1."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two CPUs: one per job")
    fields = _node_fields(tmp)
    tmp.chmod(0o755)  # the user's sbatch reads slurm.conf and reaches munged's socket through it
    with cluster(tmp / "slurm", fields, ConfinedCluster) as c:
        c.base.chmod(0o755)
        c.wait_registered()
        assert c.cgroups is not None
        with preempting_agent(tmp / "hw", c, "n1", KEYS) as hw:
            protected = _sbatch_as(c, user, "-p", "test", "-w", "n1", "-c", "1", "-J", "latency",
                                   "--wrap", "sleep 300")
            victim = _sbatch_as(c, None, "-p", "scavenger", "-w", "n1", "-c", "1", "-J", "scavenge",
                                "--wrap", "sleep 300")
            for j in (protected, victim):
                until(lambda j=j: _job(c, j).get("JobState") == "RUNNING", f"job {j} to run")
            yield c, hw, protected, victim


def _status_lines(hw: JobAgent, jobs: tuple[str, ...]) -> dict[str, str]:
    out = hw.status()
    return {j: next((x for x in out.splitlines() if f"/job_{j} " in x), "") for j in jobs}


def test_a_preemptible_job_is_reclaimed_in_status_and_the_pod_directory(short_tmp_path, job_user):
    with two_jobs(short_tmp_path, job_user) as (c, hw, protected, victim):
        until(lambda: all(_status_lines(hw, (protected, victim)).values()), "status to list both jobs", hw.daemon)
        got = _status_lines(hw, (protected, victim))
        assert "qos=reclaimed" in got[victim] and got[victim].strip().startswith("scavenger/"), got
        assert "qos=shared" in got[protected] and got[protected].strip().startswith("test/"), got
        # ... and in the pod directory ps shows
        ps = _cli(hw, "ps", "--format", "json")
        assert ps.returncode == 0, ps.stderr
        qos = {e["pod"]: e["qos"] for e in json.loads(ps.stdout)["directory"]["containers"]}
        assert qos[f"job_{victim}"] == "reclaimed" and qos[f"job_{protected}"] == "shared", qos


def test_explain_names_a_slurm_jobs_user_partition_class_and_step_cpus(short_tmp_path, job_user):
    with two_jobs(short_tmp_path, job_user) as (c, hw, protected, victim):
        assert c.cgroups is not None
        uid = int(_job(c, protected)["UserId"].split("(")[1].rstrip(")"))
        batch = c.cgroups.subtree("cpuset") / "slurm_n1" / f"uid_{uid}" / f"job_{protected}" / "step_batch"
        until(lambda: _read(batch / "cpuset.cpus"), "task/cgroup to confine the protected job's batch step")
        cpus = _read(batch / "cpuset.effective_cpus") or _read(batch / "cpuset.cpus")
        until(lambda: all(_status_lines(hw, (protected, victim)).values()), "hwagent to name both jobs", hw.daemon)
        r = _cli(hw, "explain", f"job_{protected}")
        assert r.returncode == 0, r.stdout + r.stderr
        text = r.stdout
        assert f"test/job_{protected}" in text and f"Slurm job {protected}" in text, text
        assert f"user {job_user} (uid {uid})" in text and "partition test" in text, text
        assert "class shared" in text and f"step_batch: CPUs {cpus}" in text, text
        r = _cli(hw, "explain", f"job_{protected}", "--format", "json")
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        assert {(e["container"], e["cpus"], e["owner_uid"]) for e in got["containers"]} >= {("step_batch", cpus, uid)}
        r = _cli(hw, "explain", f"scavenger/job_{victim}")
        assert r.returncode == 0 and "class reclaimed" in r.stdout and "user root (uid 0)" in r.stdout, r.stdout
        # a job not on this node: a clear error, nothing else
        r = _cli(hw, "explain", "job_999999")
        assert r.returncode != 0 and "job_999999" in r.stderr and not r.stdout, r.stdout + r.stderr
