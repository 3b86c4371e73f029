"""A job's resource limits (issue 32, review): read from the submitter's /proc entry, kept in the
pod's record, handed to the shim as ``-l``, and the system's defaults (PID 1's) when there is no
submitter. The real-user attack is tests/security/test_rlimits.py; here the decisions, on fixture
/proc trees."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from agent.contracts.pods import AdmittedPod, ContainerAssignment, ContainerSpec, PodSpec, RLimit
from agent.cpuset import CPUSet
from agent.runtime.rlimits import RLimitsUnreadable, caller_limits, parse_limits, parse_shim_arg, shim_arg, system_limits
from agent.runtime.config import RuntimeConfig
from agent.runtime.launcher import _argv
from agent.runtime.plan import PlanError, plan_container
from agent.runtime.state import ContainerFiles
from agent.workloads.codec import spec_from_json, spec_to_json
from agent.workloads.errors import AdmissionError
from agent.workloads.users import Caller, submitter_limits

LIMITS = """Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max core file size        0                    0                    bytes     
Max processes             300                  400                  processes 
Max open files            512                  1024                 files     
Max locked memory         8388608              8388608              bytes     
Max realtime timeout      unlimited            unlimited            us        
"""
ALICE_LIMITS = (RLimit("cpu", None, None), RLimit("core", 0, 0), RLimit("nproc", 300, 400),
                RLimit("nofile", 512, 1024), RLimit("memlock", 8388608, 8388608), RLimit("rttime", None, None))


def fake_proc(tmp_path: Path, pid: int, uid: int, start: int = 4242, limits: str = LIMITS) -> Path:
    d = tmp_path / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    (d / "limits").write_text(limits)
    (d / "stat").write_text(f"{pid} (my (odd) cmd) S 1 {pid} {pid} 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 {start} 1 1\n")
    (d / "status").write_text(f"Name:\tcmd\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    return tmp_path


def test_proc_limits_are_parsed_as_the_kernel_lists_them():
    assert parse_limits(LIMITS) == ALICE_LIMITS


def test_shim_argument_round_trips_and_refuses_what_is_not_a_limit():
    arg = shim_arg(ALICE_LIMITS)
    assert arg.startswith("cpu=unlimited:unlimited,core=0:0,nproc=300:400,nofile=512:1024,")
    assert parse_shim_arg(arg) == ALICE_LIMITS
    for bad in ("nofile=5:4", "bogus=1:1", "nofile=1", "nofile=-1:5", "nofile=unlimited:5", "nofile=1:2,"):
        with pytest.raises(ValueError):
            parse_shim_arg(bad)


def test_caller_limits_reads_the_callers_process(tmp_path):
    proc = fake_proc(tmp_path, 77, 1500)
    assert caller_limits(77, 1500, proc) == ALICE_LIMITS


def test_a_pid_of_another_user_or_gone_is_refused(tmp_path):
    """A pid that now belongs to another user's process (reused) never lends its limits."""
    proc = fake_proc(tmp_path, 77, 0)
    with pytest.raises(RLimitsUnreadable, match="no longer the caller's"):
        caller_limits(77, 1500, proc)
    with pytest.raises(RLimitsUnreadable, match="cannot read"):
        caller_limits(78, 1500, proc)
    with pytest.raises(RLimitsUnreadable, match="no process"):
        caller_limits(0, 1500, proc)


def test_submitter_limits_refuse_a_member_whose_process_cannot_be_read_and_let_root_fall_back():
    def unreadable(pid: int, uid: int) -> tuple[RLimit, ...]:
        raise RLimitsUnreadable("gone")

    with pytest.raises(AdmissionError) as e:
        submitter_limits(Caller(1500, 1500, (), 77), unreadable)
    assert e.value.code == "FAILED_PRECONDITION" and "resource limits" in e.value.message
    assert submitter_limits(Caller(0, 0, (), 77), unreadable) == ()
    assert submitter_limits(Caller(1500, 1500, (), 77), lambda pid, uid: ALICE_LIMITS) == ALICE_LIMITS


def _pod(rlimits: tuple[RLimit, ...] = ()) -> tuple[AdmittedPod, ContainerSpec, ContainerAssignment]:
    c = ContainerSpec("main", ("run",))
    spec = PodSpec("p", "ns", "u1", (c,), rlimits=rlimits)
    a = ContainerAssignment("main", CPUSet.parse("1"), CPUSet.parse("0"))
    return AdmittedPod(spec, "shared", {"main": a}, 0.0), c, a


def _plan(p, c, a, defaults):
    return plan_container(p, c, a, RuntimeConfig(), all_mems=CPUSet.parse("0"), managed=(), node_memory=None,
                          defaults=defaults)


def test_the_plan_takes_the_records_limits_else_pid1s_never_none():
    pid1 = (RLimit("nofile", 1024, 524288),)
    assert _plan(*_pod(ALICE_LIMITS), lambda: pid1).rlimits == ALICE_LIMITS
    assert _plan(*_pod(), lambda: pid1).rlimits == pid1

    def unreadable() -> tuple[RLimit, ...]:
        raise RLimitsUnreadable("cannot read /proc/1/limits")

    with pytest.raises(PlanError, match="no resource limits"):
        _plan(*_pod(), unreadable)


def test_system_limits_are_pid1s(tmp_path):
    assert system_limits(fake_proc(tmp_path, 1, 0)) == ALICE_LIMITS


def test_the_record_keeps_the_limits_and_an_old_record_has_none():
    spec = _pod(ALICE_LIMITS)[0].spec
    assert spec_from_json(spec_to_json(spec)).rlimits == ALICE_LIMITS
    old = spec_to_json(dataclasses.replace(spec, rlimits=()))
    assert "rlimits" not in old and spec_from_json(old).rlimits == ()


def test_the_shim_is_handed_the_limits(tmp_path):
    argv = _argv(["shim"], ContainerFiles(tmp_path), tmp_path / "log", 0, 0, "/", (), (), ("true",),
                 rlimits=ALICE_LIMITS)
    at = argv.index("-l")
    assert parse_shim_arg(argv[at + 1]) == ALICE_LIMITS and argv.index("--") > at
