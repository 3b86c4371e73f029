"""The devices a Slurm job holds, from Slurm's words: its GRES indexes (scontrol show job -d),
slurmd's records (slurmd -G), joined with the devices hwagent offers by their files."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from agent.contracts.plugins import PluginDeviceState, PluginState
from agent.slurm.gresmap import expand_hostlist, held_files, parse_job_gres, parse_slurmd_gres
from agent.slurm.jobinfo import JobInfo, JobInfoCache
from agent.slurm.jobs import HeldDevice, held_devices, join_steps, pod_directory
from agent.slurm.layout import StepCgroup
from pathlib import Path

#: slurmd -G on a node whose gres.conf lists loop234 before loop233 (as seen from slurmd 22.05)
SLURMD_G = ("slurmd: Gres Name=gpu Type=(null) Count=1 Index=234 ID=7696487 File=/dev/loop234 (null)\n"
            "slurmd: Gres Name=gpu Type=(null) Count=1 Index=233 ID=7696487 File=/dev/loop233 (null)\n"
            "slurmd: Gres Name=nic Type=(null) Count=2 Index=0 ID=7 File=(null) (null)\n")
SCONTROL = ("JobId=7 JobName=a UserId=alice(1000) Nodes=n[1-2] CPU_IDs=0 Mem=0 GRES=gpu:1(IDX:1) "
            "Nodes=n3 CPU_IDs=0-1 Mem=0 GRES=gpu:a100:2(IDX:0-1),nic:1(IDX:0) Features=(null)\n"
            "JobId=8 JobName=b Nodes=n1 CPU_IDs=1 Mem=0 GRES= Features=(null)\n")


@pytest.mark.parametrize("text, want", [
    ("n1", ["n1"]), ("n[1-3,5]", ["n1", "n2", "n3", "n5"]), ("a[01-02],vm", ["a01", "a02", "vm"]),
])
def test_host_lists(text, want):
    assert expand_hostlist(text) == want


def test_records_in_slurmds_order_and_indexes_per_node():
    recs = parse_slurmd_gres(SLURMD_G)
    assert recs == {"gpu": [("/dev/loop234",), ("/dev/loop233",)]}
    assert parse_job_gres(SCONTROL, "n2") == {"7": {"gpu": [1]}, "8": {}}
    assert parse_job_gres(SCONTROL, "n3") == {"7": {"gpu": [0, 1], "nic": [0]}, "8": {}}
    assert held_files({"gpu": [1], "nic": [0], "fpga": [0]}, recs) == ["/dev/loop233"]
    assert held_files({"gpu": [7]}, recs) == []  # an index past the records names nothing


def _state(*devs: tuple[str, bool, str]) -> PluginState:
    return PluginState("example.com/scratch", Path("/dp/x.sock"),
                       tuple(PluginDeviceState(i, ok, "" if ok else "I/O errors", None, (f"/dev/{i}",))
                             for i, ok, _ in devs))


def test_a_jobs_devices_are_hwagents_devices_with_their_health():
    recs = parse_slurmd_gres(SLURMD_G)
    jobs = {"7": JobInfo("7", 1000, "alice", "batch", gres="gres:gpu:1", held={"gpu": (1,)}),
            "9": JobInfo("9", 0, "root", "batch", gres="gres:gpu:1", held={"gpu": (0,)})}
    states = [_state(("loop233", False, ""), ("loop234", True, ""))]
    held = held_devices(jobs, recs, states)
    assert held == {"7": (HeldDevice("example.com/scratch", "loop233", False, "I/O errors"),),
                    "9": (HeldDevice("example.com/scratch", "loop234", True),)}
    steps = join_steps([StepCgroup("7", "0", "/slurm/uid_1000/job_7/step_0", "", 1000)], jobs)
    d = pod_directory(steps, held)
    assert d.holder_of("example.com/scratch", "loop233").pod == "job_7"
    assert d.holder_of("example.com/scratch", "loop234") is None  # job 9 has no step here
    assert held_devices(jobs, recs, []) == {}  # devices hwagent does not offer: named nowhere


class Slurm:
    def __init__(self, answers: Mapping[str, str]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], env: Mapping[str, str], timeout: float) -> str:
        self.calls.append(argv)
        return self.answers[argv[0].rsplit("/", 1)[-1]]


def test_the_cache_asks_scontrol_only_for_jobs_with_gres_and_slurmd_for_records():
    slurm = Slurm({"squeue": "7|1000|alice|batch|||gres:gpu:1\n8|0|root|batch|||N/A\n",
                   "scontrol": SCONTROL, "slurmd": SLURMD_G})
    cache = JobInfoCache("/usr/bin", "/etc/slurm/s.conf", runner=slurm, node="n2")
    jobs = cache.lookup(["7", "8"])
    assert jobs["7"].held == {"gpu": (1,)} and jobs["8"].held == {}
    assert [c[0] for c in slurm.calls] == ["/usr/bin/squeue", "/usr/bin/scontrol"]
    assert slurm.calls[1][-1] == "7"
    assert cache.gres_records("/usr/sbin/slurmd") == parse_slurmd_gres(SLURMD_G)
    assert slurm.calls[-1] == ["/usr/sbin/slurmd", "-G", "-N", "n2", "-f", "/etc/slurm/s.conf"]


def test_the_device_series_says_health_with_the_jobs_labels_and_only_when_allowed():
    from agent.slurm.jobs import SlurmStep
    from agent.slurm.metrics import SlurmStepCollector

    steps = [SlurmStep("7", "0", "alice", "batch", "/slurm/uid_1000/job_7/step_0", 1000)]
    held = {"7": (HeldDevice("example.com/scratch", "loop233", False, "I/O errors"),),
            "99": (HeldDevice("example.com/scratch", "loop234", True),)}  # no step on this node: not served

    def series(on: bool) -> list:
        fams = {f.name: f for f in SlurmStepCollector(lambda: (steps, {}, held), 10, labels_on=on).collect()}
        return [(s.labels, s.value) for s in fams["hwagent_slurm_job_device_healthy"].samples]

    assert series(True) == [({"job": "7", "user": "alice", "partition": "batch", "resource": "example.com/scratch",
                              "device_id": "loop233"}, 0.0)]
    assert series(False) == []
