"""The preemption's interval (agent.slurm.preempt.PreemptEngine) over Slurm's v2 layout on a fixture
tree, and its Slurm commands: which files it writes (only cpu.idle and cpu.max of preemptible jobs),
what a refused requeue leaves, and that a restarted engine lifts a quota a crashed one left."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cgroups.detect import CgroupLayout
from agent.cgroups.fs import CgroupFS
from agent.slurm.jobs import SlurmStep
from agent.slurm.preempt import JobView, PreemptEngine, group_jobs
from agent.slurm.preempt_cgroup import JobCpuCgroups, own_subtree
from agent.slurm.preempt_policy import RECLAIMED, PreemptPolicy
from agent.slurm.preempt_slurm import hand_back_argv
from agent.slurm.readings import StepReading

SCOPE = "system.slice/slurmstepd.scope"
POLICY = PreemptPolicy(partitions=frozenset({"scavenger"}), threshold=0.5, suppress_after_s=0, requeue_after_s=0,
                       relax_after_s=0, quota_cpus=0.2, retry_s=100)


def v2_tree(tmp: Path, jobs: list[str]) -> Path:
    """Slurm's v2 tree as slurmstepd leaves it: a job dir per id with step_0, cpu files at their defaults."""
    (tmp / "cgroup.controllers").write_text("cpuset cpu memory\n")
    for j in jobs:
        d = tmp / SCOPE / f"job_{j}"
        (d / "step_0").mkdir(parents=True)
        (d / "cpu.idle").write_text("0\n")
        (d / "cpu.max").write_text("max 100000\n")
        (d / "memory.max").write_text("1073741824\n")
        (d / "cpuset.cpus").write_text("0-1\n")
    return tmp


def engine(tmp: Path, calls: list[str], fail: bool = False, clock=None) -> PreemptEngine:
    fs = CgroupFS(CgroupLayout("v2", tmp, frozenset({"cpu", "cpuset", "memory"})))

    def hand_back(job: str) -> None:
        calls.append(job)
        if fail:
            raise OSError(f"scontrol requeue {job}: exit 1: Requested operation is disabled")

    return PreemptEngine(POLICY, JobCpuCgroups(fs, {"v2": tmp}, "", "n1"), hand_back,
                         clock=clock or (lambda: 0.0))


def jobs_at(delay: float) -> list[JobView]:
    return [JobView("5", "test", "normal", (f"/{SCOPE}/job_5/step_0",), {f"/{SCOPE}/job_5/step_0": delay}),
            JobView("7", "scavenger", "normal", (f"/{SCOPE}/job_7/step_0",), klass=RECLAIMED),
            JobView("8", "scavenger", "normal", (f"/{SCOPE}/job_8/step_0",), klass=RECLAIMED)]


def snapshot_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_v2_class_quota_and_hand_back_touch_only_the_preemptible_jobs_cpu_files(tmp_path):
    root = v2_tree(tmp_path, ["5", "7", "8"])
    before = snapshot_files(root)
    calls: list[str] = []
    t = iter(range(100))
    e = engine(root, calls, clock=lambda: float(next(t)))
    assert e.tick(jobs_at(0.0), at=0.0).action == "hold"  # first interval: nothing measured yet
    step = e.tick(jobs_at(2.0), at=1.0)  # 2 s of wait in 1 s: two protected tasks waiting
    assert step.action == "suppress" and e.level == pytest.approx(2.0)
    step = e.tick(jobs_at(4.0), at=2.0)
    assert step.action == "requeue" and step.leave == ("8",) and calls == ["8"]
    after = snapshot_files(root)
    changed = {k for k in after if after[k] != before.get(k)}
    assert changed == {f"{SCOPE}/job_7/cpu.idle", f"{SCOPE}/job_7/cpu.max",
                       f"{SCOPE}/job_8/cpu.idle", f"{SCOPE}/job_8/cpu.max"}
    assert after[f"{SCOPE}/job_7/cpu.idle"] == "1"
    assert after[f"{SCOPE}/job_7/cpu.max"] == "10000 100000"  # 0.2 CPUs over two jobs
    # a clean stop lifts the quota, the class stays
    e.release()
    assert (root / SCOPE / "job_7/cpu.max").read_text() == "max 100000"
    assert (root / SCOPE / "job_7/cpu.idle").read_text() == "1"


def test_a_refused_requeue_is_recorded_and_nothing_else_happens_to_the_job(tmp_path):
    root = v2_tree(tmp_path, ["5", "7", "8"])
    calls: list[str] = []
    e = engine(root, calls, fail=True)
    e.tick(jobs_at(0.0), at=0.0)
    e.tick(jobs_at(2.0), at=1.0)
    e.tick(jobs_at(4.0), at=2.0)
    assert calls == ["8"] and "disabled" in e.refused["8"] and e.handed_back == []
    # still suppressed, the other job asked next (the refused one only after retry_s)
    e.tick(jobs_at(6.0), at=3.0)
    assert calls == ["8", "7"]
    assert (root / SCOPE / "job_8/cpu.max").read_text() == "10000 100000"


def test_a_restarted_engine_lifts_a_quota_left_by_a_crash(tmp_path):
    root = v2_tree(tmp_path, ["5", "7"])
    (root / SCOPE / "job_7/cpu.max").write_text("5000 100000\n")  # what a killed hwagent left
    e = engine(root, [])
    e.tick([j for j in jobs_at(0.0) if j.job != "8"], at=0.0)
    assert (root / SCOPE / "job_7/cpu.max").read_text() == "max 100000"


def test_jobs_slurm_has_not_named_are_not_classed():
    steps = [SlurmStep("5", "0", "", "", "/a/job_5/step_0"),
             SlurmStep("7", "batch", "bob", "scavenger", "/a/job_7/step_batch", qos="low", klass=RECLAIMED),
             SlurmStep("7", "0", "bob", "scavenger", "/a/job_7/step_0", qos="low", klass=RECLAIMED)]
    got = group_jobs(steps, {"/a/job_7/step_0": StepReading(1.5)})
    # the class is the job directory's (SlurmStep.klass), carried, not decided again
    assert got == [JobView("7", "scavenger", "low", ("/a/job_7/step_batch", "/a/job_7/step_0"),
                           {"/a/job_7/step_0": 1.5}, RECLAIMED)]


def test_v1_knobs_are_hwagents_own_unless_slurm_has_a_cpu_cgroup(tmp_path):
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    fs = CgroupFS(CgroupLayout("v1", tmp_path))
    c = JobCpuCgroups(fs, {"freezer": tmp_path / "freezer"}, "/tag", "n1")
    assert own_subtree("/tag", "n1") == "/tag/hwagent_slurm_n1" and own_subtree("", "n2") == "/hwagent_slurm_n2"
    step = "/tag/slurm_n1/uid_0/job_9/step_0"
    assert c.knob_dir("9", [step]) == ("/tag/hwagent_slurm_n1/job_9", True)
    (cpu / "tag/slurm_n1/uid_0/job_9").mkdir(parents=True)  # cpu co-mounted with cpuacct + jobacct_gather/cgroup
    assert c.knob_dir("9", [step]) == ("/tag/slurm_n1/uid_0/job_9", False)


@pytest.mark.parametrize(("action", "signal", "want"), [
    ("requeue", "", ["/usr/bin/scontrol", "requeue", "42"]),
    ("cancel", "", ["/usr/bin/scancel", "42"]),
    ("cancel", "USR1", ["/usr/bin/scancel", "--signal=USR1", "--full", "42"]),
])
def test_hand_back_argv(action, signal, want):
    assert hand_back_argv("/usr/bin", action, signal, "42") == want


def test_hand_back_refuses_what_is_not_a_job_id():
    with pytest.raises(ValueError):
        hand_back_argv("/usr/bin", "requeue", "", "42 --all")


def test_v1_moves_only_the_jobs_own_processes_never_slurmstepd_or_a_reused_pid(tmp_path):
    """Slurm's freezer lists 100 (the job's shell), 101 (slurmstepd) and 102, whose pid now names a
    process of another cgroup (the job's process ended, the kernel handed the pid on): only 100 moves."""
    step = "/tag/slurm_n1/uid_0/job_9/step_batch"
    freezer = tmp_path / "freezer"
    (freezer / step.lstrip("/")).mkdir(parents=True)
    (freezer / step.lstrip("/") / "cgroup.procs").write_text("100\n101\n102\n")
    proc = tmp_path / "proc"
    for pid, comm, where in ((100, "sh", step), (101, "slurmstepd", step), (102, "sshd", "/system")):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "comm").write_text(comm + "\n")
        (proc / str(pid) / "cgroup").write_text(f"5:cpu:/\n4:freezer:{where}\n")
    (tmp_path / "cpu").mkdir()
    fs = CgroupFS(CgroupLayout("v1", tmp_path))
    c = JobCpuCgroups(fs, {"freezer": freezer}, "/tag", "n1", str(proc))
    # the cpu files a v1 cgroup has (a fixture: the kernel would make them)
    for d in ("tag/hwagent_slurm_n1", "tag/hwagent_slurm_n1/job_9"):
        (tmp_path / "cpu" / d).mkdir(parents=True)
        (tmp_path / "cpu" / d / "cpu.shares").write_text("1024\n")
    rel = c.make_reclaimed("9", [step])
    assert rel == "/tag/hwagent_slurm_n1/job_9"
    # a plain file keeps the last write; pids are moved in ascending order: 101 or 102 would show
    assert (tmp_path / "cpu/tag/hwagent_slurm_n1/job_9/cgroup.procs").read_text() == "100"
    assert (tmp_path / "cpu/tag/hwagent_slurm_n1/job_9/cpu.shares").read_text() == "2"
    assert (tmp_path / "cpu/tag/hwagent_slurm_n1/cpu.shares").read_text() == "2"
