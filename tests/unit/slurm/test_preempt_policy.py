"""The preemptible-job decision (agent.slurm.preempt_policy): the class, the level, and every
sequence of pressure up to a length, checked against the order the issue asks for:
suppress before hand-back, hand-back only while pressure persists, restore only after calm."""

from __future__ import annotations

import itertools
import re

import pytest

from agent.cpuset import CPUSet
from agent.slurm.preempt_policy import (
    PROTECTED,
    RECLAIMED,
    PreemptibleJob,
    contending,
    PreemptPolicy,
    PreemptState,
    decide,
    job_class,
    waiting_level,
)

POLICY = PreemptPolicy(partitions=frozenset({"scavenger"}), qos=frozenset({"low"}), threshold=1.0,
                       calm_fraction=0.5, suppress_after_s=2, requeue_after_s=2, relax_after_s=2,
                       quota_cpus=0.2, retry_s=3)
#: one level of each kind: pressure, the band between, calm, nothing to measure
LEVELS = {"P": 1.5, "B": 0.7, "C": 0.1, "N": None}
JOBS = (PreemptibleJob("10", 100.0), PreemptibleJob("11", 200.0))


@pytest.mark.parametrize(("partition", "qos", "want"), [
    ("scavenger", "normal", RECLAIMED),
    ("batch", "low", RECLAIMED),
    ("batch", "normal", PROTECTED),
    ("batch,scavenger", "", RECLAIMED),
    ("", "", PROTECTED),
    ("scavenger2", "lowish", PROTECTED),
])
def test_job_class(partition, qos, want):
    assert job_class(partition, qos, POLICY) == want


def test_no_preemptible_configuration_protects_everyone():
    assert job_class("scavenger", "low", PreemptPolicy()) == PROTECTED
    assert not PreemptPolicy().active


def test_waiting_level():
    # two steps' tasks waited 0.5 s and 1.5 s over 2 s: one task waiting on average
    assert waiting_level({"a": 0.0, "b": 1.0}, {"a": 0.5, "b": 2.5}, 2.0) == pytest.approx(1.0)
    # a step seen first starts counting there, a gone one adds nothing, a counter that went back adds nothing
    assert waiting_level({"a": 1.0, "c": 1.0}, {"a": 0.5, "b": 100.0}, 1.0) == 0.0
    assert waiting_level({"a": 1.0, "b": 100.0}, {"a": 1.5, "b": 100.5}, 1.0) == pytest.approx(1.0)
    assert waiting_level({}, {}, 1.0) is None
    assert waiting_level({"a": 0.0}, {"a": 1.0}, 0.0) is None


def test_contending_counts_only_protected_steps_that_share_a_cpu_with_a_preemptible_one():
    protected = {"a": CPUSet.parse("0"), "b": CPUSet.parse("1-2"), "c": None}
    assert contending(protected, [CPUSet.parse("1")]) == {"b", "c"}  # c's CPUs unknown: all of them
    assert contending(protected, [CPUSet.parse("3")]) == {"c"}
    assert contending(protected, [CPUSet.parse("3"), None]) == {"a", "b", "c"}
    assert contending(protected, []) == set()


@pytest.mark.parametrize("bad", [
    {"threshold": 0}, {"calm_fraction": 1.0}, {"calm_fraction": 0}, {"suppress_after_s": -1},
    {"quota_cpus": 0.001}, {"action": "kill"}, {"action": "cancel", "cancel_signal": "USR1; rm"},
    {"cancel_signal": "USR1"}, {"partitions": frozenset({"a,b"})}, {"qos": frozenset({""})},
])
def test_policy_validation_refuses(bad):
    with pytest.raises(ValueError):
        PreemptPolicy(**bad).validate()


def run(seq: str, jobs=JOBS, policy=POLICY):
    """Feed one level per second; the steps."""
    st = PreemptState()
    steps = []
    for t, k in enumerate(seq):
        step = decide(st, float(t), LEVELS[k], jobs, policy)
        steps.append(step)
        st = step.state
    return steps


def test_the_graduated_path():
    steps = run("PPPPPPPPCCCC")
    actions = [s.action for s in steps]
    # pressure from t=0: suppress at t=2, first hand-back at 4 (the youngest), the next at 6
    assert actions[:7] == ["hold", "hold", "suppress", "hold", "requeue", "hold", "requeue"]
    assert steps[4].leave == ("11",) and steps[6].leave == ("10",)
    # both asked: pressure goes on, nobody is asked twice within retry_s
    assert steps[7].leave == ()
    # calm from t=8: restored after 2 s of it
    assert actions[8:] == ["hold", "hold", "restore", "hold"]
    assert [s.quota_cpus for s in steps] == [None, None] + [0.2] * 8 + [None, None]


def test_calm_between_resets_the_escalation():
    actions = [s.action for s in run("PPPPCPPPP")]
    assert actions == ["hold", "hold", "suppress", "hold", "hold", "hold", "hold", "requeue", "hold"]


def test_cancel_action_and_no_jobs():
    steps = run("PPPPP", policy=PreemptPolicy(**{**POLICY.__dict__, "action": "cancel"}))
    assert steps[4].action == "cancel" and steps[4].leave == ("11",)
    assert {s.action for s in run("PPPPPP", jobs=())} == {"idle"}


def test_a_job_that_left_is_forgotten():
    st = PreemptState(suppressed=True, escalate_at=0.0, asked={"11": 0.0, "99": 0.0})
    step = decide(st, 1.0, 2.0, JOBS, POLICY)
    assert step.leave == ("10",) and set(step.state.asked) == {"10", "11"}


@pytest.mark.parametrize("length", [7])
def test_every_sequence_keeps_the_order(length):
    """Every sequence of P/B/C/N of this length (4^7 = 16,384), with and without jobs, against
    the rules read off the history alone."""
    p = POLICY
    for seq in itertools.product("PBCN", repeat=length):
        steps = run("".join(seq))
        suppressed_at: float | None = None
        last_calm = -1.0  # the last second a calm level was seen
        last_noncalm_pressure_start: float | None = None
        asked: dict[str, float] = {}
        for t, (k, s) in enumerate(zip(seq, steps, strict=True)):
            pressured, calm = k == "P", k in "CN"
            if pressured and last_noncalm_pressure_start is None:
                last_noncalm_pressure_start = t
            if calm:
                last_noncalm_pressure_start = None
            # and it does not dawdle: pressure long enough suppresses, calm long enough restores
            if suppressed_at is None and pressured and last_noncalm_pressure_start is not None \
                    and t - last_noncalm_pressure_start >= p.suppress_after_s:
                assert s.action == "suppress", (seq, t)
            last_p = max((i for i in range(t + 1) if seq[i] == "P"), default=-1)
            if suppressed_at is not None and calm and any(
                    seq[c] in "CN" for c in range(last_p + 1, t - int(p.relax_after_s) + 1)):
                assert s.action == "restore", (seq, t)
            # the quota is set exactly while suppressed
            assert (s.quota_cpus is not None) == s.state.suppressed, (seq, t)
            if s.action == "suppress":
                assert pressured and suppressed_at is None
                assert last_noncalm_pressure_start is not None
                assert t - last_noncalm_pressure_start >= p.suppress_after_s
                suppressed_at = t
            if s.leave:
                # only while suppressed, under pressure, requeue_after_s after both the cut and the last calm
                assert suppressed_at is not None and pressured, (seq, t)
                assert t - suppressed_at >= p.requeue_after_s and t - last_calm > p.requeue_after_s, (seq, t)
                assert len(s.leave) == 1 and s.action == "requeue"
                for j in s.leave:
                    assert j not in asked or t - asked[j] >= p.retry_s
                    asked[j] = t
            if s.action == "restore":
                assert suppressed_at is not None and calm
                # no pressure within relax_after_s (the band between neither starts nor stops a clock)
                assert any(seq[c] in "CN" for c in range(last_p + 1, t - int(p.relax_after_s) + 1)), (seq, t)
                suppressed_at = None
            if calm:
                last_calm = t
        for s in run("".join(seq), jobs=()):
            assert s.action == "idle" and s.quota_cpus is None and not s.leave


@pytest.mark.parametrize(("toml", "says"), [
    ('preempt_action = "kill"', "preempt_action must be one of requeue, cancel"),
    ('preemptible_partitions = ["a b"]', "must be one word"),
    ('preempt_cancel_signal = "USR1"', 'is for preempt_action = "cancel"'),
    ('preemptible_partitions = "scavenger"', "expected a list"),
    ("preempt_quota_cpus = 0", "preempt_quota_cpus must be >= 0.01"),
])
def test_the_slurm_section_refuses_bad_preemption_keys_with_a_clear_error(toml, says):
    from agent.config import ConfigError, loads

    with pytest.raises(ConfigError, match=re.escape(says)):
        loads(f"[slurm]\n{toml}\n")


def test_the_slurm_section_gives_the_policy():
    from agent.config import loads
    from agent.slurm.config import SLURM_SECTION
    from agent.slurm.preempt_policy import policy_from_config

    cfg = loads('[slurm]\npreemptible_qos = ["low"]\npreempt_action = "cancel"\npreempt_cancel_signal = "USR1"\n')
    p = policy_from_config(cfg[SLURM_SECTION])
    assert p.qos == frozenset({"low"}) and p.action == "cancel" and p.cancel_signal == "USR1" and p.active
