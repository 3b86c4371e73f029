"""The allocator's two searches agree on every claim without selector errors, and every
answer is a valid allocation (hypothesis); the exponential case gives up and says so."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.dra import allocsearch
from agent.dra.allocsearch import MISSING, Problem, SearchAbort, exact_search, fast_search
from agent.dra.allocator import AllocationRefused, allocate
from agent.dra.catalog import DraDevice
from agent.dra.cel import CELError, device_activation, matches
from agent.dra.claims import Constraint, DeviceClass, DeviceRequest, ResourceClaim


@st.composite
def problems(draw) -> Problem:
    n = draw(st.integers(1, 9))
    nreq = draw(st.integers(1, 3))
    modes = [draw(st.sampled_from(["ExactCount", "ExactCount", "All"])) for _ in range(nreq)]
    counts = [draw(st.integers(1, 4)) if m == "ExactCount" else 0 for m in modes]
    free = [draw(st.booleans()) or draw(st.booleans()) for _ in range(n)]
    table = [[draw(st.booleans()) for _ in range(n)] for _ in range(nreq)]
    ncons = draw(st.integers(0, 2))
    binds = [frozenset(draw(st.sets(st.integers(0, nreq - 1), min_size=1))) for _ in range(ncons)]
    values = [[draw(st.sampled_from([MISSING, ("int", 1), ("int", 2), ("bool", True), ("string", "1")]))
               for _ in range(n)] for _ in range(ncons)]
    return Problem(modes, counts, n, free, lambda r, pos: table[r][pos], binds, lambda c, pos: values[c][pos],
                   [True] * n)


def _valid(p: Problem, got: list[list[int]]) -> None:
    flat = [pos for picks in got for pos in picks]
    assert len(flat) == len(set(flat)), "a device twice"
    for r, picks in enumerate(got):
        assert all(p.free[pos] and p.verdict(r, pos) for pos in picks)
        if p.modes[r] == "All":
            assert picks == [pos for pos in range(p.n) if p.verdict(r, pos)]
        else:
            assert len(picks) == p.counts[r]
    for c, reqs in enumerate(p.binds):
        vals = {p.value(c, pos) for r in reqs for pos in got[r]}
        assert MISSING not in vals and len(vals) <= 1


@settings(max_examples=400, deadline=None)
@given(p=problems())
def test_fast_and_exact_agree(p: Problem) -> None:
    """Without selector errors the two find an answer for the same problems, except where the walk
    stops as upstream's does (an All device breaking a constraint): then fast may still find one."""
    fast = fast_search(p)
    try:
        exact = exact_search(p)
    except SearchAbort:
        exact = fast
    assert (exact is None) == (fast is None)
    for got in (exact, fast):
        if got is not None:
            _valid(p, got)


def test_the_exponential_case_gives_up_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    # three requests over the same 60 devices, each pair under its own constraint: value groups prune
    # it to a few hundred tries (none satisfies all three); with a bound of 20 it gives up, saying why
    devs = [DraDevice("hwagent.io", "p", f"d{i:02}", {"hwagent.io/a": i % 4, "hwagent.io/b": (i // 4) % 5,
                                                       "hwagent.io/c": (i * 7) % 6}, {}, None, f"d{i}", "x")
            for i in range(60)]
    reqs = tuple(DeviceRequest(f"r{k}", "any", (), "ExactCount", 3) for k in range(3))
    claim = ResourceClaim("ns", "big", "u", reqs, (Constraint(("r0", "r1"), "hwagent.io/a"),
                                                   Constraint(("r1", "r2"), "hwagent.io/b"),
                                                   Constraint(("r0", "r2"), "hwagent.io/c")))
    with pytest.raises(AllocationRefused, match="no set of free devices"):
        allocate(claim, {"any": DeviceClass("any")}, devs, {})
    monkeypatch.setattr(allocsearch, "MAX_TRIES", 20)
    with pytest.raises(AllocationRefused, match="the search is exponential here"):
        allocate(claim, {"any": DeviceClass("any")}, devs, {})


def test_cost_limit_refuses_the_device() -> None:
    act = device_activation("hwagent.io", {"hwagent.io/n": 1}, {})
    heavy = "[1,2,3,4,5,6,7,8,9,10].all(i, [1,2,3,4,5,6,7,8,9,10].all(j, [1,2,3,4,5,6,7,8,9,10].all(k, k > 0)))"
    assert matches(heavy, act, "d0")  # within the default limit
    with pytest.raises(CELError, match="actual cost limit exceeded"):
        matches(heavy, act, "d0", cost_limit=2_000)
