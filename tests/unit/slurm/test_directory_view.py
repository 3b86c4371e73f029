"""Who sees which of the workloads another front names (Slurm's jobs) through ``hwagent ps``."""

from __future__ import annotations

from agent.contracts.poddirectory import ContainerIdentity, PodDirectory
from agent.workloads.directoryview import visible_entries

D = PodDirectory((
    ContainerIdentity("batch", "job_7", "step_0", "slurm-job-7", "shared", "/slurm/uid_1001/job_7/step_0",
                      owner_uid=1001),
    ContainerIdentity("batch", "job_5", "step_batch", "slurm-job-5", "shared", "/slurm/uid_1000/job_5/step_batch",
                      owner_uid=1000),
    ContainerIdentity("k8s", "web", "nginx", "uid-1", "shared", "/kubepods/pod1/c1"),  # uid not known
), source="slurm cgroups of node n1 and squeue")


def test_root_sees_every_entry_sorted():
    got = visible_entries(D, 0)
    assert [(r["pod"], r["container"]) for r in got["containers"]] == [
        ("job_5", "step_batch"), ("job_7", "step_0"), ("web", "nginx")]
    assert got["source"] == D.source


def test_a_user_sees_only_what_runs_as_them_and_nothing_whose_owner_is_unknown():
    got = visible_entries(D, 1000)
    assert [r["pod"] for r in got["containers"]] == ["job_5"]
    assert got["containers"][0]["owner_uid"] == 1000
    nobody = visible_entries(D, 4242)
    assert nobody == {"source": "", "containers": []}  # not even where the names come from


def test_no_directory_is_empty():
    assert visible_entries(None, 0) == {"source": "", "containers": []}
