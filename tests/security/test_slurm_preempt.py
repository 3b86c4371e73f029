"""A user's Slurm job cannot make root's hwagent requeue another user's job (issue 35 part 4).

hwagent (root) hands preemptible jobs back to Slurm when protected jobs keep waiting for a CPU.
A user controls how much her own job waits: with cores confined (task/cgroup
``ConstrainCores=yes``), mallory's protected job runs three spinners on its one core and waits
as long as she likes. alice's preemptible job runs on the other core and takes nothing from
mallory's; root must not suppress or requeue it for mallory's self-made wait. The real peer as in
tests/integration/slurm/test_preempt.py: slurmctld, three namespaced slurmds, proctrack/cgroup,
task/cgroup, a hwagent for n1; both users are local users of the test's own.
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.integration.runtime.test_end_to_end import until
from tests.integration.slurm.cluster import missing_binaries
from tests.integration.slurm.test_preempt import (
    CPU,
    SPIN,
    ConfinedCluster,
    _job,
    _node_fields,
    _read,
    cluster,
    preempting_agent,
)

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(bool(missing_binaries()),
                       reason=f"no {', '.join(missing_binaries())}: scripts/setup.sh test installs slurm-wlm and munge"),
]


@pytest.fixture
def users() -> Iterator[tuple[str, str]]:
    """(alice, mallory): local users of the test's own (random names), removed with their homes."""
    names = (f"hwpa{uuid.uuid4().hex[:8]}", f"hwpm{uuid.uuid4().hex[:8]}")
    for n in names:
        subprocess.run(["useradd", "-m", n], check=True, capture_output=True)
    try:
        yield names
    finally:
        for n in names:
            subprocess.run(["userdel", "-r", n], capture_output=True)


def _sbatch_as(user: str, conf, *args: str) -> str:
    r = subprocess.run(["runuser", "-u", user, "--", "env", f"SLURM_CONF={conf}", "sbatch", "--parsable",
                        "-o", "/dev/null", *args], capture_output=True, text=True, timeout=60,
                       cwd=os.path.expanduser(f"~{user}"))
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().split(";")[0]


def test_a_users_self_made_wait_does_not_get_another_users_job_requeued(short_tmp_path, users):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two CPUs: one per job")
    alice, mallory = users
    short_tmp_path.chmod(0o755)  # the users' sbatch reads slurm.conf and reaches munged's socket through it
    fields = _node_fields(short_tmp_path)
    with cluster(short_tmp_path / "slurm", fields, ConfinedCluster) as c:
        c.base.chmod(0o755)
        c.wait_registered()
        assert c.cgroups is not None
        keys = ('preemptible_partitions = ["scavenger"]\npreempt_threshold = 0.3\n'
                "preempt_suppress_after_s = 1\npreempt_requeue_after_s = 2\npreempt_quota_cpus = 0.05\n")
        with preempting_agent(short_tmp_path / "hw", c, "n1", keys) as hw:
            hers = _sbatch_as(mallory, c.conf, "-p", "test", "-w", "n1", "-c", "1", "-J", "selfwait",
                              "--wrap", SPIN.format(n=3))
            victim = _sbatch_as(alice, c.conf, "-p", "scavenger", "-w", "n1", "-c", "1", "--requeue",
                                "-J", "victim", "--wrap", SPIN.format(n=2))
            until(lambda: _job(c, victim).get("JobState") == "RUNNING" and _job(c, hers).get("JobState") == "RUNNING",
                  "both jobs to run")
            uid = pwd.getpwnam(alice).pw_uid
            mine = CPU / c.cgroups.tag / "hwagent_slurm_n1" / f"job_{victim}"
            until(lambda: _read(mine / "cpu.shares") == "2", "alice's job in the reclaimed class", hw.daemon)
            # her wait is real (three spinners on one core) and hwagent sees her step
            assert (c.cgroups.subtree("cpuset") / "slurm_n1" / f"uid_{uid}" / f"job_{victim}").is_dir()
            time.sleep(8)  # suppress_after + requeue_after, four times over
            acted = re.findall(r'msg="slurm preempt decision" action=(suppress|requeue)', hw.daemon.log())
            record = _job(c, victim)
            assert acted == [] and record["Restarts"] == "0", (acted, record.get("Restarts"))
            assert record["JobState"] == "RUNNING" and _read(mine / "cpu.cfs_quota_us") == "-1"
