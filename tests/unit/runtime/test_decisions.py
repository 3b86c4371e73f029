"""Pure decisions of the runtime: kubelet CPU math, device rules, back-off, phases, exit records."""

from __future__ import annotations

import json

import pytest

from agent.cgroups.limits import (
    DEFAULT_DEVICES,
    CgroupLimits,
    DeviceRule,
    device_rules,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    shares_to_weight,
)
from agent.cgroups.workload import controller_files
from agent.cpuset import CPUSet
from agent.runtime.backoff import Backoff
from agent.runtime.lifecycle import app_phase, remaining_grace, should_restart, should_restart_init
from agent.runtime.state import FORMAT, PodFiles, PodRecord, parse_exit
from agent.statefile import canonical_json, sha256_of
from agent.contracts.pods import ContainerState, ContainerStatus, PodPhase


# the kubelet's helpers_linux_test.go cases (values recomputed from its formulas)
@pytest.mark.parametrize("milli,shares", [(None, 2), (0, 2), (1, 2), (5, 5), (500, 512), (1000, 1024), (1500, 1536),
                                          (256000, 262144), (300000, 262144)])
def test_milli_cpu_to_shares(milli, shares):
    assert milli_cpu_to_shares(milli) == shares


@pytest.mark.parametrize("milli,period,quota", [(None, 100000, None), (0, 100000, None), (5, 100000, 1000),
                                                (9, 100000, 1000), (10, 100000, 1000), (200, 100000, 20000),
                                                (500, 100000, 50000), (1500, 100000, 150000), (1500, 50000, 75000)])
def test_milli_cpu_to_quota(milli, period, quota):
    assert milli_cpu_to_quota(milli, period) == quota


@pytest.mark.parametrize("shares,weight", [(2, 1), (1024, 39), (262144, 10000), (512, 20), (0, 0)])
def test_shares_to_weight(shares, weight):
    assert shares_to_weight(shares) == weight


def test_managed_policy_denies_only_managed_not_granted():
    allow, deny = device_rules("managed", [("b", 7, 0, "rw")], [("b", 7, 0), ("b", 7, 1), ("c", 195, 0)])
    assert allow == ()
    assert [r.line() for r in deny] == ["b 7:1 rwm", "c 195:0 rwm"]


def test_strict_policy_denies_all_then_allows_defaults_and_grants():
    allow, deny = device_rules("strict", [("b", 7, 0, "r")], [("b", 7, 1)])
    assert deny == (DeviceRule("a"),)
    assert allow[: len(DEFAULT_DEVICES)] == DEFAULT_DEVICES
    assert allow[-1].line() == "b 7:0 rm"
    assert "c 136:* rwm" in [r.line() for r in allow]  # /dev/pts/*


def limits(**kw) -> CgroupLimits:
    base = dict(cpus=CPUSet.parse("2-3"), mems=CPUSet.parse("1"), cpu_shares=512, cpu_quota_us=150000,
                memory_limit=1 << 30, pids_max=100, device_deny=(DeviceRule("b", 7, 1),))
    base.update(kw)
    return CgroupLimits(**base)


def test_v1_files_in_kernel_order():
    lim = limits(cpu_idle=True)
    assert controller_files(lim, "cpuset", v2=False) == [("cpuset.mems", "1"), ("cpuset.cpus", "2-3")]
    assert controller_files(lim, "cpu", v2=False) == [("cpu.shares", "512"), ("cpu.cfs_period_us", "100000"),
                                                      ("cpu.cfs_quota_us", "150000"), ("cpu.idle", "1")]
    assert controller_files(lim, "memory", v2=False) == [("memory.limit_in_bytes", str(1 << 30))]
    assert controller_files(lim, "pids", v2=False) == [("pids.max", "100")]
    assert controller_files(lim, "devices", v2=False) == [("devices.deny", "b 7:1 rwm")]
    unlimited = limits(cpu_quota_us=None, memory_limit=None, pids_max=None)
    assert ("cpu.cfs_quota_us", "-1") in controller_files(unlimited, "cpu", v2=False)
    assert controller_files(unlimited, "memory", v2=False) == [("memory.limit_in_bytes", "-1")]


def test_v2_files():
    lim = limits()
    assert controller_files(lim, "cpu", v2=True) == [("cpu.weight", "20"), ("cpu.max", "150000 100000")]
    assert controller_files(limits(cpu_quota_us=None), "cpu", v2=True)[1] == ("cpu.max", "max 100000")
    assert controller_files(lim, "memory", v2=True) == [("memory.max", str(1 << 30))]
    assert controller_files(lim, "devices", v2=True) == []  # v2 devices are a BPF program


def test_backoff_doubles_to_the_max_and_resets_after_a_long_run():
    b = Backoff(10, 300, 600)
    delays = []
    for _ in range(8):
        b = b.after_exit(1)
        delays.append(b.current_s)
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300]
    assert b.after_exit(600).current_s == 10


@pytest.mark.parametrize("policy,code,restart", [("Always", 0, True), ("Always", 1, True), ("OnFailure", 0, False),
                                                 ("OnFailure", 2, True), ("Never", 0, False), ("Never", 1, False)])
def test_restart_policy(policy, code, restart):
    assert should_restart(policy, code) is restart


def test_init_containers_restart_on_failure_unless_never():
    assert should_restart_init("Always", 1) and should_restart_init("OnFailure", 1)
    assert not should_restart_init("Never", 1) and not should_restart_init("Always", 0)


def term(code):
    return ContainerStatus("c", ContainerState.TERMINATED, exit_code=code)


def test_app_phase():
    assert app_phase("Never", [term(0), term(0)]) == PodPhase.SUCCEEDED
    assert app_phase("Never", [term(0), term(1)]) == PodPhase.FAILED
    assert app_phase("Never", [term(0), ContainerStatus("c", ContainerState.RUNNING)]) is None
    assert app_phase("Never", []) is None


def test_exit_records():
    assert parse_exit("exited 3\n").exit_code == 3
    e = parse_exit("signaled 9\n")
    assert (e.exit_code, e.signal) == (137, 9)
    e = parse_exit("error exec 2 /x: No such file or directory\n")
    assert not e.started and e.start_error == "exec: /x: No such file or directory"
    with pytest.raises(ValueError):
        parse_exit("garbage")


def test_bpf_device_program_source():
    from agent.cgroups.devbpf import program_source

    managed = program_source("managed", (), (DeviceRule("b", 7, 1), DeviceRule("c", 195, None)))
    assert "if (type == 1 && ctx->major == 7 && ctx->minor == 1) return 0;" in managed
    assert "if (type == 2 && ctx->major == 195) return 0;" in managed
    assert managed.rstrip().endswith("return 1;\n}")
    strict = program_source("strict", (DeviceRule("c", 1, 3, "rw"),), (DeviceRule("a"),))
    # rw = READ|WRITE = 6: mknod (1) is refused
    assert "if (type == 2 && ctx->major == 1 && ctx->minor == 3 && (access & ~6) == 0) return 1;" in strict
    assert strict.rstrip().endswith("return 0;\n}")


# a stop a restarted daemon resumes keeps what is left of its grace period
@pytest.mark.parametrize("deadline,grace,now,left", [
    (110.0, 30.0, 100.0, 10.0),    # ten seconds were still promised
    (110.0, 30.0, 120.0, 0.0),     # the deadline passed while the daemon was down
    (1000.0, 30.0, 100.0, 30.0),   # the clock jumped back: never more than the stop was given
    (None, None, 100.0, 0.0),      # a record from before deadlines were kept: kill at once, as before
    (110.0, None, 100.0, 0.0),
])
def test_remaining_grace(deadline, grace, now, left):
    assert remaining_grace(deadline, grace, now) == left


def test_pod_record_keeps_the_stop_deadline(tmp_path):
    files = PodFiles(tmp_path, "u1")
    rec = PodRecord("u1", "default/a", stopping=("Evicted", "memory"), stop_deadline=1234.5, stop_grace_s=30.0)
    files.write(PodFiles.encode(rec))
    back = files.load()
    assert back is not None
    assert (back.stopping, back.stop_deadline, back.stop_grace_s) == (("Evicted", "memory"), 1234.5, 30.0)


def _write_signed(files: PodFiles, body: dict) -> None:
    """A pod.json whose checksum matches its body, whatever the body says."""
    files.path.mkdir(parents=True)
    doc = {"version": FORMAT, "checksum": sha256_of(canonical_json(body)), "pod": body}
    (files.path / "pod.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("bad", ["soon", float("inf"), True, [1]])
def test_pod_record_with_an_impossible_deadline_is_not_trusted(tmp_path, bad):
    files = PodFiles(tmp_path, "u1")
    rec = PodRecord("u1", "default/a", stopping=("Stopped", ""), stop_deadline=1.0, stop_grace_s=5.0)
    body = rec.to_json()
    body["stop_deadline"] = bad
    _write_signed(files, body)
    assert files.load() is None  # the runtime then re-derives what it can from the container files


def test_pod_record_from_before_deadlines_loads(tmp_path):
    files = PodFiles(tmp_path, "u1")
    body = PodRecord("u1", "default/a", stopping=("Stopped", "")).to_json()
    del body["stop_deadline"], body["stop_grace_s"]
    _write_signed(files, body)
    back = files.load()
    assert back is not None and back.stopping == ("Stopped", "") and back.stop_deadline is None
