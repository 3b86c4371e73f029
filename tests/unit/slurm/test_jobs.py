"""Slurm's answer about jobs (squeue's lines, cached), joined with the step cgroups, and the
step series bounded as the pod series are."""

from __future__ import annotations

from collections.abc import Mapping

from agent.contracts.poddirectory import ContainerIdentity
from agent.slurm.jobinfo import JobInfo, JobInfoCache, parse_squeue, squeue_argv
from agent.slurm.jobs import SlurmStep, join_steps, pod_directory
from agent.slurm.layout import StepCgroup
from agent.slurm.metrics import OTHER, SlurmStepCollector, bounded_steps
from agent.slurm.readings import StepReading


def test_squeue_lines_parsed_and_bad_ones_skipped():
    text = ("5|1000|alice|batch|proj|normal|N/A\n17|0|root|gpu,debug|(null)|(null)|gres:gpu:1\ngarbage\n"
            "6|x|bob|p|||\n7|1|a|b|c|d\n")
    assert parse_squeue(text) == {
        "5": JobInfo("5", 1000, "alice", "batch", "proj", "normal"),
        "17": JobInfo("17", 0, "root", "gpu,debug", "", "", "gres:gpu:1"),
    }


def test_squeue_argv_is_absolute_and_sorted():
    assert squeue_argv("/usr/bin/", ["10", "9", "10"]) == [
        "/usr/bin/squeue", "-h", "-o", "%A|%U|%u|%P|%a|%q|%b", "-j", "9,10"]


class FakeSlurm:
    def __init__(self) -> None:
        self.calls: list[tuple[list[str], dict[str, str]]] = []
        self.answer = ""
        self.fail = False

    def __call__(self, argv: list[str], env: Mapping[str, str], timeout: float) -> str:
        self.calls.append((argv, dict(env)))
        if self.fail:
            raise OSError("squeue exited 1: slurm_load_jobs error: Unable to contact slurm controller")
        return self.answer


def test_cache_asks_once_per_new_job_then_after_the_ttl_and_forgets_ended_jobs():
    now = [0.0]
    slurm = FakeSlurm()
    cache = JobInfoCache("/opt/slurm/bin", "/etc/slurm/x.conf", ttl=60, runner=slurm, clock=lambda: now[0])
    slurm.answer = "5|1000|alice|batch|||\n"
    assert cache.lookup(["5"]) == {"5": JobInfo("5", 1000, "alice", "batch")}
    argv, env = slurm.calls[0]
    assert argv[0] == "/opt/slurm/bin/squeue" and argv[-1] == "5"
    assert env == {"PATH": "/opt/slurm/bin", "LANG": "C", "SLURM_CONF": "/etc/slurm/x.conf"}
    now[0] = 30
    assert cache.lookup(["5"])["5"].user == "alice" and len(slurm.calls) == 1
    slurm.answer = "6|0|root|debug|||\n"
    assert set(cache.lookup(["5", "6"])) == {"5", "6"}
    assert slurm.calls[-1][0][-1] == "6"  # only the job not known yet
    now[0] = 100
    slurm.answer = "5|1000|alice|batch|||\n6|0|root|debug|||\n"
    cache.lookup(["5", "6"])
    assert slurm.calls[-1][0][-1] == "5,6"  # both older than the ttl
    assert set(cache.lookup(["6"])) == {"6"}


def test_a_failed_query_keeps_what_is_known_and_says_why():
    slurm = FakeSlurm()
    cache = JobInfoCache("/usr/bin", runner=slurm)
    slurm.answer = "5|1000|alice|batch|||\n"
    cache.lookup(["5"])
    slurm.fail = True
    assert set(cache.lookup(["5", "6"])) == {"5"}
    assert "Unable to contact" in cache.last_error
    assert "SLURM_CONF" not in slurm.calls[0][1]


def test_join_names_steps_by_slurm_and_leaves_unanswered_ones_unnamed():
    cgs = [StepCgroup("5", "0", "/slurm_n1/uid_1000/job_5/step_0", "n1", 1000, (0,)),
           StepCgroup("6", "batch", "/slurm_n1/uid_0/job_6/step_batch", "n1", 0)]
    steps = join_steps(cgs, {"5": JobInfo("5", 1001, "alice", "batch", "acct", "high")})
    assert steps == (
        SlurmStep("5", "0", "alice", "batch", "/slurm_n1/uid_1000/job_5/step_0", 1001, (0,), "acct", "high",
                  "protected"),
        SlurmStep("6", "batch", "", "", "/slurm_n1/uid_0/job_6/step_batch", 0),
    )
    d = pod_directory(steps, source="s")
    # the owner is Slurm's uid where Slurm answered (it wins over the tree's), the tree's before
    assert d.containers[0] == ContainerIdentity("batch", "job_5", "step_0", "slurm-job-5", "shared",
                                                "/slurm_n1/uid_1000/job_5/step_0", owner_uid=1001)
    assert d.containers[1].owner_uid == 0
    assert d.container_of("/slurm_n1/uid_1000/job_5/step_0/task_0").pod == "job_5"
    assert d.pods == {"slurm-job-5": ("batch", "job_5"), "slurm-job-6": ("", "job_6")}


def _steps(n: int) -> tuple[list[SlurmStep], dict[str, StepReading]]:
    steps = [SlurmStep(str(j), "0", "u", "p", f"/slurm/uid_0/job_{j}/step_0") for j in range(1, n + 1)]
    return steps, {s.cgroup: StepReading(float(j), 100 * j, None, 1) for j, s in enumerate(steps, start=1)}


def test_series_are_bounded_busiest_first_and_the_rest_summed():
    steps, readings = _steps(5)
    got = bounded_steps(steps, readings, 2)
    assert set(got) == {("5", "0", "u", "p"), ("4", "0", "u", "p"), OTHER}
    assert sum(r.runqueue_delay_s for r in got[OTHER]) == 1 + 2 + 3


def test_collector_serves_labels_only_when_allowed():
    steps, readings = _steps(3)

    def samples(on: bool) -> dict[str, list]:
        fams = list(SlurmStepCollector(lambda: (steps, readings, {}), 10, labels_on=on).collect())
        return {f.name: [(s.labels, s.value) for s in f.samples] for f in fams}

    on = samples(True)
    assert ({"job": "3", "step": "0", "user": "u", "partition": "p"}, 300.0) in on["hwagent_slurm_step_memory_bytes"]
    assert len(on["hwagent_slurm_step_runqueue_delay_seconds"]) == 3
    off = samples(False)
    assert off["hwagent_slurm_steps"] == [({}, 3.0)]
    assert off["hwagent_slurm_step_memory_bytes"] == [] and off["hwagent_slurm_step_runqueue_delay_seconds"] == []


def test_a_preemptible_jobs_steps_are_reclaimed_in_the_directory_with_their_cpus():
    from agent.cpuset import CPUSet
    from agent.slurm.preempt_policy import PROTECTED, RECLAIMED, PreemptPolicy

    policy = PreemptPolicy(partitions=frozenset({"scavenger"}), qos=frozenset({"low"}))
    cgs = [StepCgroup("5", "0", "/slurm/uid_1000/job_5/step_0", "", 1000),
           StepCgroup("6", "0", "/slurm/uid_0/job_6/step_0", "", 0),
           StepCgroup("7", "0", "/slurm/uid_0/job_7/step_0", "", 0),
           StepCgroup("8", "0", "/slurm/uid_0/job_8/step_0", "", 0)]
    jobs = {"5": JobInfo("5", 1000, "alice", "batch", "", "normal"),
            "6": JobInfo("6", 0, "root", "scavenger", "", "normal"),
            "7": JobInfo("7", 0, "root", "batch", "", "low")}
    steps = join_steps(cgs, jobs, policy)
    assert [s.klass for s in steps] == [PROTECTED, RECLAIMED, RECLAIMED, ""]  # job 8: Slurm has not named it
    d = pod_directory(steps, cpus={"/slurm/uid_1000/job_5/step_0": CPUSet.parse("2-3")})
    assert [c.qos for c in d.containers] == ["shared", "reclaimed", "reclaimed", "shared"]
    assert d.containers[0].cpus == CPUSet.parse("2-3") and d.containers[1].cpus is None
    # no policy: no job is preemptible
    assert {s.klass for s in join_steps(cgs, jobs)} == {PROTECTED, ""}
