"""Slurm's cgroup layout read from fixture trees: v1 (``slurm`` and ``slurm_<node>``) and v2
(``system.slice/[<node>_]slurmstepd.scope``), as slurm 22.05's cgroup plugins make them.
The v2 layout on a real kernel is the VM tier's (tests/vm); the v1 one on this host's
kernel is tests/integration/slurm/test_jobs_cgroups.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.slurm.layout import StepCgroup, parse_step_path, walk_slurm_cgroups


def mk(root: Path, *rels: str) -> None:
    for r in rels:
        (root / r.strip("/")).mkdir(parents=True, exist_ok=True)


@pytest.mark.parametrize("rel, want", [
    ("/slurm/uid_1000/job_42/step_0", StepCgroup("42", "0", "/slurm/uid_1000/job_42/step_0", "", 1000)),
    ("/slurm_n2/uid_0/job_7/step_batch", StepCgroup("7", "batch", "/slurm_n2/uid_0/job_7/step_batch", "n2", 0)),
    ("/t/x/slurm_n1/uid_5/job_9/step_extern", StepCgroup("9", "extern", "/t/x/slurm_n1/uid_5/job_9/step_extern",
                                                          "n1", 5)),
    ("/system.slice/slurmstepd.scope/job_3/step_interactive",
     StepCgroup("3", "interactive", "/system.slice/slurmstepd.scope/job_3/step_interactive", "", None)),
    ("/system.slice/n3_slurmstepd.scope/job_3/step_1+2",
     StepCgroup("3", "1+2", "/system.slice/n3_slurmstepd.scope/job_3/step_1+2", "n3", None)),
])
def test_step_paths_are_named_by_the_layout(rel, want):
    assert parse_step_path(rel) == want


@pytest.mark.parametrize("rel", [
    "/slurm/uid_1000/job_42", "/slurm/uid_1000/job_42/step_0/task_0", "/slurm/uid_x/job_42/step_0",
    "/slurm/job_42/step_0", "/kubepods/uid_1/job_2/step_0", "/notslurm/uid_1/job_2/step_0",
    "/slurm/uid_1/job_2/step_weird", "/system.slice/other.scope/job_3/step_0", "/slurm/uid_1/job_/step_0",
    "/slurm/uid_1/job_2/step_0/../x",
])
def test_other_paths_are_not_steps(rel):
    assert parse_step_path(rel) is None


def test_v1_tree_per_node_with_tasks_and_a_parent(tmp_path):
    mk(tmp_path, "hwt/slurm_n1/uid_1000/job_5/step_0/task_0", "hwt/slurm_n1/uid_1000/job_5/step_0/task_1",
       "hwt/slurm_n1/uid_1000/job_5/step_batch/task_0", "hwt/slurm_n1/uid_1000/job_5/step_extern",
       "hwt/slurm_n2/uid_1000/job_5/step_0/task_2", "hwt/slurm_n1/system", "hwt/slurm_n1/uid_1000/job_6",
       "hwt/slurm_n1/uid_1000/stray/step_0", "elsewhere/slurm_n1/uid_1/job_1/step_0")
    (tmp_path / "hwt/slurm_n1/uid_1000/job_5/step_0/tasks").write_text("123\n")
    got = walk_slurm_cgroups(tmp_path, "hwt", "n1")
    assert got == [
        StepCgroup("5", "0", "/hwt/slurm_n1/uid_1000/job_5/step_0", "n1", 1000, (0, 1)),
        StepCgroup("5", "batch", "/hwt/slurm_n1/uid_1000/job_5/step_batch", "n1", 1000, (0,)),
        StepCgroup("5", "extern", "/hwt/slurm_n1/uid_1000/job_5/step_extern", "n1", 1000, ()),
    ]
    every = walk_slurm_cgroups(tmp_path, "/hwt/", None)
    assert {(s.node, s.step) for s in every} == {("n1", "0"), ("n1", "batch"), ("n1", "extern"), ("n2", "0")}


def test_v1_unnamed_tree_belongs_to_any_node(tmp_path):
    mk(tmp_path, "slurm/uid_0/job_1/step_0/task_0")
    assert [s.path for s in walk_slurm_cgroups(tmp_path, "", "n9")] == ["/slurm/uid_0/job_1/step_0"]


def test_v2_tree_tasks_below_user(tmp_path):
    mk(tmp_path, "system.slice/slurmstepd.scope/system", "system.slice/slurmstepd.scope/job_8/step_0/slurm",
       "system.slice/slurmstepd.scope/job_8/step_0/user/task_0", "system.slice/slurmstepd.scope/job_8/step_0/user/task_3",
       "system.slice/slurmstepd.scope/job_8/step_extern/slurm", "system.slice/n2_slurmstepd.scope/job_9/step_0",
       "system.slice/ssh.service")
    got = walk_slurm_cgroups(tmp_path, "", "n1")
    assert got == [
        StepCgroup("8", "0", "/system.slice/slurmstepd.scope/job_8/step_0", "", None, (0, 3)),
        StepCgroup("8", "extern", "/system.slice/slurmstepd.scope/job_8/step_extern", "", None, ()),
    ]
    assert sorted(s.job for s in walk_slurm_cgroups(tmp_path, "", "n2")) == ["8", "8", "9"]


def test_links_are_not_followed_and_a_missing_root_is_empty(tmp_path):
    mk(tmp_path, "real/uid_0/job_1/step_0")
    (tmp_path / "slurm").symlink_to(tmp_path / "real")
    assert walk_slurm_cgroups(tmp_path) == []
    assert walk_slurm_cgroups(tmp_path / "absent") == []
