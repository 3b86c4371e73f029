"""The Slurm job directory's refresh on fixture trees (walk + Slurm's answer + readings), and
when the component runs at all."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from agent.config import loads
from agent.contracts import DaemonContext
from agent.slurm.component import factory, node_name
from agent.slurm.config import SlurmConfig
from agent.slurm.jobinfo import JobInfoCache
from agent.slurm.readings import StepReader
from agent.slurm.source import SlurmJobSource
from agent.topology.model import synthetic


def _ctx(text: str, mode: str, tmp_path: Path) -> DaemonContext:
    return DaemonContext(loads(text), tmp_path, synthetic(), mode=mode)


def test_the_component_runs_in_standalone_mode_with_slurm_enabled_only(tmp_path):
    assert factory(_ctx("", "standalone", tmp_path)) is None
    assert factory(_ctx("[slurm]\nenabled = true\n", "kubelet", tmp_path)) is None
    assert factory(_ctx("[slurm]\nenabled = true\n", "standalone", tmp_path)) is not None


@pytest.mark.parametrize("text, why", [
    ('node_name = "a b"', "node_name"), ('bin_dir = "usr/bin"', "bin_dir"), ('slurm_conf = "x.conf"', "slurm_conf"),
    ('cgroup_parent = "a/../b"', "cgroup_parent"), ("refresh_s = 0", "refresh_s"), ("max_step_series = 0", "max_step"),
])
def test_bad_settings_are_refused_by_name(text, why):
    with pytest.raises(ValueError, match=why):
        loads(f"[slurm]\n{text}\n")


def test_node_name_defaults_to_the_short_host_name():
    assert node_name(SlurmConfig(node_name="n7")) == "n7"
    assert node_name(SlurmConfig()) == os.uname().nodename.split(".")[0]


class Squeue:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def __call__(self, argv: list[str], env: Mapping[str, str], timeout: float) -> str:
        self.asked.append(argv[-1])
        return self.answer


def _v1_tree(root: Path, pid: int) -> None:
    for ctl in ("freezer", "memory"):
        step = root / ctl / "hwt" / "slurm_n1" / "uid_1000" / "job_42" / "step_0"
        (step / "task_0").mkdir(parents=True)
        (root / ctl / "hwt" / "slurm_n2" / "uid_1000" / "job_43" / "step_0").mkdir(parents=True)
    (root / "freezer/hwt/slurm_n1/uid_1000/job_42/step_0/tasks").write_text("")
    (root / "freezer/hwt/slurm_n1/uid_1000/job_42/step_0/task_0/tasks").write_text(f"{pid}\n")
    (root / "memory/hwt/slurm_n1/uid_1000/job_42/step_0/memory.usage_in_bytes").write_text("4096\n")


def test_refresh_names_this_nodes_steps_reads_them_and_publishes_them_as_pods(tmp_path):
    _v1_tree(tmp_path, os.getpid())
    squeue = Squeue("42|1000|alice|batch|proj|normal|N/A\n")
    src = SlurmJobSource("n1", {"freezer": tmp_path / "freezer", "memory": tmp_path / "memory"}, "hwt",
                         JobInfoCache("/usr/bin", runner=squeue), StepReader(tmp_path / "freezer", tmp_path / "memory",
                                                                             False))
    snap = src.refresh()
    assert [(s.job, s.step, s.user, s.partition, s.tasks) for s in snap.steps] == [("42", "0", "alice", "batch", (0,))]
    assert squeue.asked == ["42"]  # job 43 is node n2's
    r = snap.readings["/hwt/slurm_n1/uid_1000/job_42/step_0"]
    assert r.memory_bytes == 4096 and r.threads >= 1 and r.runqueue_delay_s >= 0
    assert r.cpu_pressure_some_s is None  # v1
    pods = src.current
    assert [(c.namespace, c.pod, c.container, c.cgroup) for c in pods.containers] == [
        ("batch", "job_42", "step_0", "/hwt/slurm_n1/uid_1000/job_42/step_0")]
    assert [c.pod_name for c in src.containers_for_pressure()] == ["job_42"]
    src.refresh()
    assert squeue.asked == ["42"]  # cached
    # the step ends: gone from the directory, its reading and Slurm's answer forgotten
    import shutil

    for ctl in ("freezer", "memory"):
        shutil.rmtree(tmp_path / ctl / "hwt" / "slurm_n1" / "uid_1000" / "job_42")
    snap = src.refresh()
    assert snap.steps == () and dict(snap.readings) == {} and src.current.containers == ()


def test_the_walk_keeps_to_the_first_hierarchy_holding_this_nodes_tree(tmp_path):
    """task/cgroup alone (no freezer tree) is still seen; with both, one hierarchy is walked."""
    (tmp_path / "freezer" / "slurm_n9" / "uid_0" / "job_1" / "step_0").mkdir(parents=True)  # another node's
    (tmp_path / "cpuset" / "slurm_n1" / "uid_0" / "job_2" / "step_0").mkdir(parents=True)
    (tmp_path / "memory" / "slurm_n1" / "uid_0" / "job_3" / "step_0").mkdir(parents=True)
    roots = {c: tmp_path / c for c in ("freezer", "cpuset", "memory")}
    src = SlurmJobSource("n1", roots, "", JobInfoCache("/usr/bin", runner=Squeue("")), StepReader(None, None, False))
    assert [s.job for s in src.walk()] == ["2"]
    (tmp_path / "freezer" / "slurm_n1" / "uid_0" / "job_2" / "step_0").mkdir(parents=True)
    assert [s.path for s in src.walk()] == ["/slurm_n1/uid_0/job_2/step_0"]


def test_v2_readings_threads_below_user_memory_current_and_cpu_pressure(tmp_path):
    """The v2 layout's files on a fixture tree: threads in step/user/task_N and step/slurm, PSI."""
    step = tmp_path / "system.slice" / "slurmstepd.scope" / "job_8" / "step_0"
    (step / "user" / "task_0").mkdir(parents=True)
    (step / "slurm").mkdir()
    (step / "cgroup.threads").write_text("")
    (step / "user" / "cgroup.threads").write_text("")
    (step / "user" / "task_0" / "cgroup.threads").write_text(f"{os.getpid()}\n")
    (step / "slurm" / "cgroup.threads").write_text("999999999\n")  # a thread that is gone: left out
    (step / "memory.current").write_text("8192\n")
    (step / "cpu.pressure").write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=2500000\n"
                                       "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    reader = StepReader(tmp_path, tmp_path, True)
    rel = "/system.slice/slurmstepd.scope/job_8/step_0"
    first = reader.read([rel])[rel]
    assert first.threads == 2 and first.memory_bytes == 8192 and first.cpu_pressure_some_s == 2.5
    assert first.runqueue_delay_s >= 0
    again = reader.read([rel])[rel]
    assert again.runqueue_delay_s >= first.runqueue_delay_s  # cumulative
    assert reader.read(["/gone"])["/gone"] == type(first)(0.0, None, None, 0)


def test_a_refresh_gives_each_step_its_cpuset_and_a_preemptible_job_the_reclaimed_class(tmp_path):
    """v1: the step's CPUs from the cpuset hierarchy (task/cgroup's), whichever hierarchy was walked;
    the class from [slurm] preemptible_partitions, decided once here for every view."""
    from agent.cpuset import CPUSet
    from agent.slurm.preempt_policy import PreemptPolicy

    _v1_tree(tmp_path, os.getpid())
    cpuset = tmp_path / "cpuset/hwt/slurm_n1/uid_1000/job_42/step_0"
    cpuset.mkdir(parents=True)
    (cpuset / "cpuset.effective_cpus").write_text("1,3\n")
    roots = {c: tmp_path / c for c in ("freezer", "cpuset", "memory")}
    src = SlurmJobSource("n1", roots, "hwt", JobInfoCache("/usr/bin", runner=Squeue("42|1000|alice|scav|p|normal|N/A\n")),
                         StepReader(tmp_path / "freezer", tmp_path / "memory", False),
                         policy=PreemptPolicy(partitions=frozenset({"scav"})))
    src.refresh()
    (c,) = src.current.containers
    assert c.cgroup == "/hwt/slurm_n1/uid_1000/job_42/step_0" and c.cpus == CPUSet.parse("1,3")
    assert c.qos == "reclaimed" and src.snapshot.steps[0].klass == "reclaimed"
    assert src.containers_for_pressure()[0].cpuset == CPUSet.parse("1,3")
    # no cpuset of its own (task/cgroup does not confine cores): no CPUs claimed; no policy: shared
    (cpuset / "cpuset.effective_cpus").write_text("\n")
    src.policy = None
    src.refresh()
    assert src.current.containers[0].cpus is None and src.current.containers[0].qos == "shared"
