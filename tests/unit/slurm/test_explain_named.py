"""`hwagent explain` of a Slurm job from the pod directory's entries (agent.commands._explain_named), pure."""

from __future__ import annotations

from agent.commands._explain_named import SLURM_UID_PREFIX, explain_named, find_named
from agent.contracts.poddirectory import ContainerIdentity, PodDirectory
from agent.cpuset import CPUSet
from agent.slurm.jobs import job_uid
from agent.workloads.directoryview import visible_entries

D = PodDirectory((
    ContainerIdentity("scav", "job_7", "step_0", job_uid("7"), "reclaimed", "/slurm/uid_0/job_7/step_0",
                      CPUSet.parse("2-3"), owner_uid=0),
    ContainerIdentity("scav", "job_7", "step_batch", job_uid("7"), "reclaimed", "/slurm/uid_0/job_7/step_batch",
                      owner_uid=0),
    ContainerIdentity("batch", "job_5", "step_0", job_uid("5"), "shared", "/slurm/uid_1000/job_5/step_0",
                      CPUSet.parse("0"), owner_uid=1000),
    ContainerIdentity("default", "web", "nginx", "uid-1", "shared", "/kubepods/pod1/c1"),
), source="slurm cgroups of node n1 and squeue")
ENTRIES = visible_entries(D, 0)["containers"]


def test_the_uid_prefix_is_the_job_directorys():
    assert job_uid("42") == f"{SLURM_UID_PREFIX}42"


def test_a_slurm_job_is_found_in_its_partition_without_one_given_and_not_in_another():
    assert [e["container"] for e in find_named(ENTRIES, None, "job_7")] == ["step_0", "step_batch"]
    assert [e["container"] for e in find_named(ENTRIES, None, "scav/job_7")] == ["step_0", "step_batch"]
    assert find_named(ENTRIES, "batch", "job_7") == [] and find_named(ENTRIES, None, "job_9") == []
    # a pod of another front keeps the default namespace rule
    assert [e["pod"] for e in find_named(ENTRIES, None, "web")] == ["web"]
    assert find_named(ENTRIES, "other", "web") == []


def test_the_job_is_said_with_its_user_partition_class_and_each_steps_cpus():
    lines = explain_named("slurm cgroups of node n1 and squeue", find_named(ENTRIES, None, "job_7"),
                          lambda uid: {0: "root"}[uid])
    assert lines[0].startswith("scav/job_7: Slurm job 7 on this node, named by slurm cgroups of node n1")
    assert lines[1].startswith("user root (uid 0), partition scav, class reclaimed: preemptible")
    assert lines[3] == "  step_0: CPUs 2-3 (its cpuset), qos reclaimed, cgroup /slurm/uid_0/job_7/step_0"
    assert "no cpuset of its own" in lines[4]
    other = explain_named("nri", find_named(ENTRIES, None, "web"), str)
    assert other[0] == "default/web: named by nri (not admitted by hwagent)" and other[1] == "owner -, qos shared"
