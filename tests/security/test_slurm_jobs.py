"""Slurm's jobs in `hwagent ps` (issue 35 part 2) cross the privilege boundary: the root daemon
names every user's job on the node; a member of the socket group must see only her own.

A real one-node Slurm cluster (slurm-wlm 22.05, proctrack/cgroup and task/cgroup in a
test-owned subtree) and a real daemon with ``[slurm]`` on. alice (a member) and mallory (in
no group of ours) each run a job with ``srun``. Root's ``ps`` lists both with their owners;
alice's lists hers and not a word of mallory's (job id, user name); mallory reaches
nothing, as for pods. The cgroup tree and Slurm name the owner (uid_<u>, squeue's %U);
nothing the user hands hwagent decides it.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.slurm.cluster import SlurmCluster, missing_binaries, slurm_cluster
from tests.security.support import ALICE, MALLORY, Box, security_box, until

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(bool(missing_binaries()),
                       reason=f"no {', '.join(missing_binaries())}: scripts/setup.sh test installs slurm-wlm and munge"),
]

GROUP = "hwj" + ALICE[-8:]


def _node_line(base: Path) -> str:
    cfg = base / "empty.toml"
    cfg.write_text("")
    r = subprocess.run([str(Path(os.sys.executable)), "-m", "agent", "slurm", "conf", "--only", "node", "--config",
                        str(cfg)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def _srun(c: SlurmCluster, user: str | None, name: str) -> subprocess.Popen:
    argv = ["srun", "-N1", "-J", name, "sleep", "300"]
    if user is None:
        return subprocess.Popen(argv, env=c.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return subprocess.Popen(["runuser", "-u", user, "--", "env", f"SLURM_CONF={c.conf}", *argv],
                            cwd=pwd.getpwnam(user).pw_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[Box, SlurmCluster, dict[str, str]]]:
    """The box, the cluster, and job name -> job id for alice's and mallory's jobs."""
    base = Path(tempfile.mkdtemp(prefix="hwsj-"))
    base.chmod(0o755)  # the users' srun reads slurm.conf and reaches munged through it
    try:
        with slurm_cluster(base / "slurm", _node_line(base), cgroups=True) as c:
            c.base.chmod(0o755)
            c.wait_registered()
            assert c.cgroups is not None
            config = {"slurm": {"enabled": "true", "node_name": f'"{c.node_name}"', "slurm_conf": f'"{c.conf}"',
                                "cgroup_parent": f'"{c.cgroups.tag}"', "refresh_s": "0.5"}}
            for box in security_box(config=config, group=GROUP):
                # two jobs: the node has two cores and each job holds one (CR_Core)
                jobs = {name: _srun(c, user, name) for name, user in (("alicejob", ALICE), ("mallojob", MALLORY))}
                try:
                    ids = {}
                    for name in jobs:
                        ids[name] = until(lambda n=name: (o := c.run(["squeue", "-h", "-n", n, "-t", "R", "-o",
                                                                          "%A"]).stdout.strip()) and o, f"{name}")
                    until(lambda b=box, i=ids: all(f"job_{j}" in b.cli(None, "ps").stdout for j in i.values()),
                          "root's ps to list both jobs", box.daemon)
                    yield box, c, ids
                finally:
                    for name in jobs:
                        c.run(["scancel", "-n", name])
                    for p in jobs.values():
                        p.wait(30)
    finally:
        subprocess.run(["rm", "-rf", str(base)])


def test_root_sees_every_users_job_with_its_owner(world):
    box, _c, ids = world
    r = box.cli(None, "ps")
    assert r.returncode == 0, r.stderr
    for name, user in (("alicejob", ALICE), ("mallojob", MALLORY)):
        row = next(line for line in r.stdout.splitlines() if f" job_{ids[name]} " in f" {line} ")
        assert row.split()[-1] == user and "step_0" in row, r.stdout


def test_a_member_sees_her_own_job_and_nothing_of_anyone_elses(world):
    box, _c, ids = world
    r = box.cli(ALICE, "ps")
    assert r.returncode == 0, r.stderr
    assert f"job_{ids['alicejob']}" in r.stdout and ALICE in r.stdout, r.stdout
    assert f"job_{ids['mallojob']}" not in r.stdout and MALLORY not in r.stdout, r.stdout
    doc = json.loads(box.cli(ALICE, "ps", "--format", "json").stdout)
    assert [e["pod"] for e in doc["directory"]["containers"]] == [f"job_{ids['alicejob']}"]


def test_an_outsider_reaches_nothing(world):
    box, _c, ids = world
    r = box.cli(MALLORY, "ps")
    assert r.returncode != 0
    assert not any(f"job_{j}" in r.stdout + r.stderr for j in ids.values())


def test_describe_shows_a_members_own_job_and_no_one_elses(world):
    box, _c, ids = world
    own = box.cli(ALICE, "describe", f"test/job_{ids['alicejob']}")
    assert own.returncode == 0 and "step_0" in own.stdout and "slurm cgroups of node" in own.stdout, own.stderr
    other = box.cli(ALICE, "describe", f"test/job_{ids['mallojob']}")
    assert other.returncode != 0 and "step_0" not in other.stdout + other.stderr
    assert f"job_{ids['mallojob']}" in box.cli(None, "describe", f"test/job_{ids['mallojob']}").stdout
