"""The memory.high decisions (agent.advisor.memcontrol), pure: PSI traces in, per-pod memory.high out.

The traces are tables of (memory PSI "some" share of each interval, memory.current per pod);
the noisy ones are what a node's memory PSI looks like under a bursty allocator: single
spikes and dips that must neither lower nor lift anything on their own."""

from __future__ import annotations

import math

import pytest

from agent.advisor.memcontrol import MemPod, MemSample, MemState, MemTuning, decide_memory

MiB = 1 << 20
T = MemTuning(psi_threshold=0.10, calm_fraction=0.25, confirm=2, relax_after=5, lower_cooldown_s=3.0,
              raise_cooldown_s=5.0, factor=0.8, floor_bytes=64 * MiB)


def run(trace: list[float | None], pods: dict[str, int], t: MemTuning = T, st: MemState | None = None,
        avg10: float | None = None):
    """One decision a second along ``trace``; each pod's memory.current follows its high (the
    kernel reclaims it down to the high) and otherwise stays where the table put it."""
    st = st or MemState()
    current = dict(pods)
    out = []
    for i, some in enumerate(trace):
        s = MemSample(at=100.0 + i, some=some, full=None, some_avg10=avg10,
                      pods={p: MemPod(current=c) for p, c in current.items()})
        d = decide_memory(st, s, t)
        st = d.state
        out.append(d)
        for p, h in st.highs.items():
            current[p] = min(current[p], h)
    return out, st


def actions(ds) -> list[str]:
    return [d.action for d in ds]


def test_pressure_confirmed_lowers_in_steps_down_to_the_floor():
    ds, st = run([0.3] * 40, {"/k/podA": 400 * MiB, "/k/podB": 80 * MiB})
    acts = actions(ds)
    assert acts[0] == "hold" and acts[1] == "lower"  # confirm = 2
    lowers = [d for d in ds if d.action == "lower"]
    a = [d.state.highs["/k/podA"] for d in lowers]
    assert a[0] == int(400 * MiB * 0.8) and a == sorted(a, reverse=True)
    assert st.highs["/k/podA"] == 64 * MiB  # never below the floor
    # podB at 80 MiB: one step (64 MiB, the floor), then nothing lower
    assert st.highs["/k/podB"] == 64 * MiB
    # the cool-down: lowerings at least lower_cooldown_s apart
    times = [d.at for d in lowers]
    assert all(b - a >= T.lower_cooldown_s for a, b in zip(times, times[1:], strict=False))
    assert ds[-1].action == "hold" and "floor" in ds[-1].reason
    assert st.start == {"/k/podA": 400 * MiB, "/k/podB": 80 * MiB}


def test_a_pod_under_its_floor_is_left_alone():
    ds, st = run([0.5] * 6, {"/k/small": 30 * MiB})
    assert "lower" not in actions(ds) and st.highs == {}


def test_the_pods_own_floor_counts_over_the_configured_one():
    s = MemSample(at=1.0, some=0.5, full=None, some_avg10=None, pods={"/k/p": MemPod(400 * MiB, floor=300 * MiB)})
    st = MemState(over=1)
    d = decide_memory(st, s, T)
    assert d.action == "lower" and d.state.highs["/k/p"] == 320 * MiB
    d2 = decide_memory(d.state, MemSample(at=10.0, some=0.5, full=None, some_avg10=None,
                                          pods={"/k/p": MemPod(320 * MiB, floor=300 * MiB)}), T)
    assert d2.state.highs["/k/p"] == 300 * MiB


@pytest.mark.parametrize("name,trace", [
    # single spikes over the threshold between calm samples: never confirmed
    ("spikes", [0.0, 0.4, 0.0, 0.5, 0.01, 0.3, 0.0, 0.6, 0.0, 0.35, 0.0]),
    # a band between calm and over: not pressure
    ("band", [0.05, 0.08, 0.09, 0.06, 0.07, 0.09, 0.08]),
    # no PSI at all (a kernel without it, psi=0 on its command line)
    ("none", [None] * 8),
])
def test_noise_lowers_nothing(name, trace):
    ds, st = run(trace, {"/k/podA": 400 * MiB})
    assert "lower" not in actions(ds), (name, [(d.action, d.reason) for d in ds])
    assert st.highs == {}


def test_calm_raises_back_in_steps_then_lifts():
    trace = [0.3] * 20 + [0.0] * 60
    ds, st = run(trace, {"/k/podA": 400 * MiB})
    acts = actions(ds)
    i_raise = acts.index("raise")
    assert "lower" not in acts[i_raise:]
    raised = [d.state.highs.get("/k/podA") for d in ds[i_raise:] if d.action in ("raise", "lift")]
    assert raised[-1] is None and acts[-1] == "hold" and st.highs == {} and st.start == {}
    steps = [h for h in raised if h is not None]
    assert steps == sorted(steps) and len(steps) >= 1  # up in steps, then lifted
    # relax_after calm samples before the first raise, raise_cooldown_s between raises
    assert i_raise >= 20 + T.relax_after - 1
    times = [d.at for d in ds if d.action in ("raise", "lift")]
    assert all(b - a >= T.raise_cooldown_s for a, b in zip(times, times[1:], strict=False))


def test_a_noisy_calm_with_band_samples_still_raises_and_spikes_reset_it():
    lowered = run([0.3] * 4, {"/k/podA": 400 * MiB})[1]
    assert lowered.highs
    # band samples (0.05..0.09) neither count nor break the calm run: 5 calm ones among them raise
    ds, _ = run([0.0, 0.07, 0.01, 0.08, 0.0, 0.06, 0.02, 0.0], {"/k/podA": 400 * MiB}, st=lowered)
    assert "raise" in actions(ds) or "lift" in actions(ds)
    # an over sample every fourth one resets the run: nothing is raised
    ds, st = run([0.0, 0.0, 0.0, 0.3] * 4, {"/k/podA": 400 * MiB}, st=lowered)
    assert not {"raise", "lift"} & set(actions(ds)), [(d.action, d.reason) for d in ds]


def test_avg10_is_the_signal_when_no_interval_share_is_known():
    ds, st = run([None] * 4, {"/k/podA": 400 * MiB}, avg10=0.5)
    assert "lower" in actions(ds)


def test_a_pod_no_longer_reclaimed_is_dropped_and_a_new_one_starts_unlowered():
    lowered = run([0.3] * 4, {"/k/podA": 400 * MiB, "/k/podB": 400 * MiB})[1]
    assert set(lowered.highs) == {"/k/podA", "/k/podB"}
    s = MemSample(at=200.0, some=0.0, full=None, some_avg10=None, pods={"/k/podB": MemPod(300 * MiB),
                                                                          "/k/podC": MemPod(500 * MiB)})
    d = decide_memory(lowered, s, T)
    assert set(d.state.highs) == {"/k/podB"} and set(d.state.start) == {"/k/podB"}


def test_the_record_has_inputs_and_output():
    ds, _ = run([0.3, 0.3], {"/k/podA": 400 * MiB})
    rec = ds[-1].record()
    assert rec["action"] == "lower" and rec["threshold"] == 0.10
    assert rec["inputs"]["psi_some"] == 0.3 and rec["inputs"]["pods"] == {"/k/podA": 400 * MiB}
    assert rec["highs"] == {"/k/podA": int(400 * MiB * 0.8)}


def test_state_round_trips_through_json_without_its_times():
    st = MemState(highs={"/k/p": 100 * MiB}, start={"/k/p": 200 * MiB}, over=1, last_lower=5.0)
    back = MemState.from_json(st.to_json())
    assert back.highs == st.highs and back.start == st.start and back.over == 0
    assert math.isinf(back.last_lower)
    assert MemState.from_json({"highs": {"/k/p": "x"}, "start": 3}) == MemState()


@pytest.mark.parametrize("bad", [dict(psi_threshold=0), dict(psi_threshold=1.5), dict(calm_fraction=1),
                                 dict(factor=1.0), dict(factor=0), dict(confirm=0), dict(floor_bytes=-1),
                                 dict(lower_cooldown_s=-1)])
def test_validate_refuses_nonsense(bad):
    with pytest.raises(ValueError):
        MemTuning(**bad).validate()
