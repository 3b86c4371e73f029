"""Slurm's jobs named in hwagent's signals on the real peer (issue 35 part 2).

A slurmctld and slurmds (Debian's slurm-wlm 22.05) with proctrack/cgroup and task/cgroup,
their cgroups confined to a test-owned subtree (tests/integration/slurm/cgroups.py), and
one hwagent per node with ``[slurm]`` on (tests/integration/slurm/jobagent.py). A step
started with ``srun`` must appear in that node's hwagent metrics with its job, step, user
and partition as Slurm has them; with ``srun -N3`` every node's hwagent names its own
part; a hwagent killed -9 and restarted while a job runs disturbs nothing of Slurm's.
The cgroup v2 layout on a real kernel is the VM tier's (this host is hybrid v1; the v2
reader is tested on fixture trees in tests/unit/slurm/test_layout.py).
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.integration.runtime.test_end_to_end import until
from tests.integration.slurm.cgroups import CONTROLLERS
from tests.integration.slurm.cluster import missing_binaries, multi_node_cluster, slurm_cluster
from tests.integration.slurm.jobagent import job_agent

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(bool(missing_binaries()),
                       reason=f"no {', '.join(missing_binaries())}: scripts/setup.sh test installs slurm-wlm and munge"),
]


def _node_line(tmp) -> str:
    cfg = tmp / "empty.toml"
    cfg.write_text("")
    r = subprocess.run([sys.executable, "-m", "agent", "slurm", "conf", "--only", "node", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.fixture
def job_user() -> Iterator[str]:
    """A local user of the test's own (random name), removed with its home afterwards."""
    name = f"hwsj{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "-m", name], check=True, capture_output=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True)


def _wait_job(cluster, name: str) -> str:
    """The id of the running job called ``name``."""
    return until(lambda: (out := cluster.run(["squeue", "-h", "-n", name, "-t", "R", "-o", "%A"]).stdout.strip())
                 and out.split()[0], f"job {name} to run")


def test_a_users_step_is_named_by_job_step_user_partition_and_its_cgroups_are_the_test_subtree(
        short_tmp_path, job_user):
    line = _node_line(short_tmp_path)
    short_tmp_path.chmod(0o755)  # the user's srun reads slurm.conf and reaches munged's socket through it
    uid = pwd.getpwnam(job_user).pw_uid
    with slurm_cluster(short_tmp_path / "slurm", line, cgroups=True) as c:
        (c.base).chmod(0o755)
        c.wait_registered()
        node = c.node_name
        with job_agent(short_tmp_path / "hw", c, node) as hw:
            assert hw.named_steps() == set()
            srun = subprocess.Popen(["runuser", "-u", job_user, "--", "env", f"SLURM_CONF={c.conf}",
                                     "srun", "-N1", "-J", "named", "sleep", "30"],
                                    cwd=os.path.expanduser(f"~{job_user}"),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                job = _wait_job(c, "named")
                want = (job, "0", job_user, "test")
                until(lambda: want in hw.named_steps(), f"hwagent to name {want}", hw.daemon)
                # Slurm's tree is in the test-owned subtree of every controller, none at the top
                tag = c.cgroups.tag
                for ctl in CONTROLLERS:
                    assert (c.cgroups.v1_root / ctl / tag / f"slurm_{node}" / f"uid_{uid}" / f"job_{job}"
                            / "step_0").is_dir(), ctl
                    assert not (c.cgroups.v1_root / ctl / f"slurm_{node}").exists()
                # the job's process really is in that step's cgroup (proctrack/cgroup's freezer)
                tasks = (c.cgroups.subtree("freezer") / f"slurm_{node}/uid_{uid}/job_{job}/step_0/tasks").read_text()
                procs = {(open(f"/proc/{p}/comm").read().strip(), os.stat(f"/proc/{p}").st_uid) for p in tasks.split()}
                assert ("sleep", uid) in procs
                assert hw.series("hwagent_slurm_step_memory_bytes")[want] > 0
                # and `hwagent status` lists it where it lists kubelet-mode and NRI pods (POD_DIRECTORY)
                status = hw.status()
                assert f"test/job_{job}" in status and "containers=step_0" in status, status
                comp = next(x for x in status.splitlines() if x.strip().startswith("slurm-jobs"))
                assert "healthy" in comp and "1 containers" in comp and f"node {node} and squeue" in comp, comp
            finally:
                subprocess.run(["scancel", "-n", "named"], env=c.env, capture_output=True)
                srun.wait(30)
            until(lambda: not any(j == job for j, *_ in hw.named_steps()), "the ended step to leave the series")
    assert not c.cgroups.subtree("freezer").exists()


def test_hwagent_killed_and_restarted_disturbs_no_running_job(short_tmp_path):
    line = _node_line(short_tmp_path)
    with slurm_cluster(short_tmp_path / "slurm", line, cgroups=True) as c:
        c.wait_registered()
        node = c.node_name
        with job_agent(short_tmp_path / "hw", c, node) as hw:
            srun = subprocess.Popen(["srun", "-N1", "-J", "survive", "sh", "-c", "sleep 8; echo done"], env=c.env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            job = _wait_job(c, "survive")
            want = (job, "0", "root", "test")
            until(lambda: want in hw.named_steps(), f"hwagent to name {want}", hw.daemon)
            step = c.cgroups.subtree("freezer") / f"slurm_{node}/uid_0/job_{job}/step_0"
            before = step.joinpath("tasks").read_text()
            hw.kill()
            assert step.is_dir() and step.joinpath("tasks").read_text() == before
            hw.start()
            until(lambda: want in hw.named_steps(), f"the restarted hwagent to name {want}", hw.daemon)
            out, err = srun.communicate(timeout=60)
            assert srun.returncode == 0 and out.strip() == "done", err
            log = c.log("slurmd")
            assert "error" not in log.split("launch task StepId=" + job, 1)[-1].lower().replace(
                "pmix", ""), log[-2000:]


NAMES = ["n1", "n2", "n3"]


def test_every_node_hwagent_names_its_part_of_a_three_node_step(short_tmp_path):
    fields = _node_line(short_tmp_path).split(" ", 1)[1]
    with multi_node_cluster(short_tmp_path / "slurm", NAMES, fields, cgroups=True) as c:
        c.wait_registered()
        agents = []
        from contextlib import ExitStack

        with ExitStack() as stack:
            for n in NAMES:
                agents.append(stack.enter_context(job_agent(short_tmp_path / f"hw-{n}", c, n)))
            srun = subprocess.Popen(["srun", "-N3", "-J", "wide", "sleep", "30"], env=c.env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                job = _wait_job(c, "wide")
                want = (job, "0", "root", "test")
                for hw in agents:
                    until(lambda hw=hw: want in hw.named_steps(), f"{hw.node}'s hwagent to name {want}", hw.daemon)
                    # each names only its own node's part: one step 0 of that job, in its own slurm_<node>
                    tag = c.cgroups.tag
                    assert (c.cgroups.subtree("freezer") / f"slurm_{hw.node}/uid_0/job_{job}/step_0").is_dir(), tag
                    assert hw.series("hwagent_slurm_step_threads")[want] >= 1
            finally:
                subprocess.run(["scancel", "-n", "wide"], env=c.env, capture_output=True)
                srun.wait(30)
        time.sleep(0)


def test_a_cluster_stopped_under_a_running_job_leaves_no_step_and_no_cgroup(short_tmp_path):
    """A test that fails with a job running stops the daemons under it: the job's slurmstepd would
    wait for the controller forever, in the test's cgroups. The harness ends it and removes them."""
    line = _node_line(short_tmp_path)
    with slurm_cluster(short_tmp_path / "slurm", line, cgroups=True) as c:
        c.wait_registered()
        srun = subprocess.Popen(["srun", "-N1", "-J", "orphan", "sleep", "300"], env=c.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_job(c, "orphan")
        until(lambda: c.cgroups.pids(), "the step's processes in the test subtree")
        stepds = [p for p in c.cgroups.pids() if open(f"/proc/{p}/comm").read().startswith("slurmstepd")]
        assert stepds
    srun.kill()
    srun.wait(30)
    for ctl in CONTROLLERS:
        assert not c.cgroups.subtree(ctl).exists(), ctl
    for p in stepds:
        assert not os.path.exists(f"/proc/{p}") or "zombie" in open(f"/proc/{p}/status").read().lower()
