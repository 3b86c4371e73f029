"""GetPreferredAllocation's choice and request checks (pure functions)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.deviceplugin.allocation import NO_NUMA, RequestError, check_ids, preferred

NUMA = {"a0": 0, "a1": 0, "b0": 1, "b1": 1, "b2": 1, "c0": 2, "x": None}


def test_fewest_numa_nodes_first():
    assert preferred(list(NUMA), [], 3, NUMA, NUMA) == ["b0", "b1", "b2"]
    assert preferred(list(NUMA), [], 2, NUMA, NUMA) == ["a0", "a1"]
    assert set(preferred(list(NUMA), [], 5, NUMA, NUMA)) == {"a0", "a1", "b0", "b1", "b2"}


def test_must_include_first_and_its_node_preferred():
    assert preferred(list(NUMA), ["b2"], 2, NUMA, NUMA) == ["b2", "b0"]
    assert preferred(list(NUMA), ["a1"], 2, NUMA, NUMA) == ["a1", "a0"]
    assert preferred(list(NUMA), ["c0", "a0"], 2, NUMA, NUMA) == ["c0", "a0"]


def test_only_offered_devices_are_used():
    assert preferred(["a0", "b0", "b1"], [], 2, NUMA, NUMA) == ["b0", "b1"]


@pytest.mark.parametrize("available,must,size,code,text", [
    (["a0", "zz"], [], 1, "not_found", "zz"),
    (["a0", "a0"], [], 1, "invalid", "more than once"),
    (["a0", "a1"], ["b0"], 1, "not_found", "b0"),
    (["a0", "a1"], [], 3, "invalid", "more than the 2 available"),
    (["a0", "a1"], ["a0", "a1"], 1, "invalid", "more than allocation_size"),
    (["a0"], [], 0, "invalid", "positive"),
])
def test_bad_requests(available, must, size, code, text):
    with pytest.raises(RequestError) as e:
        preferred(available, must, size, NUMA, NUMA)
    assert e.value.code == code and text in str(e.value)


def test_check_ids():
    check_ids(["a0", "b0"], NUMA)
    with pytest.raises(RequestError, match="a0 more than once"):
        check_ids(["a0", "b0", "a0"], NUMA)


def _groups(ids, numa):
    return {NO_NUMA if numa[i] is None else numa[i] for i in ids}


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_preferred_is_valid_and_minimal(data):
    n = data.draw(st.integers(1, 12))
    numa = {f"d{i}": data.draw(st.sampled_from([0, 1, 2, 3, None])) for i in range(n)}
    available = data.draw(st.lists(st.sampled_from(sorted(numa)), min_size=1, unique=True))
    size = data.draw(st.integers(1, len(available)))
    must = data.draw(st.lists(st.sampled_from(available), max_size=size, unique=True))
    got = preferred(available, must, size, numa, numa)
    assert len(got) == size and len(set(got)) == size
    assert set(got) <= set(available) and got[: len(must)] == must
    # no other valid choice spans fewer NUMA groups (brute force)
    best = min(len(_groups(list(must) + list(rest), numa))
               for rest in itertools.combinations([a for a in available if a not in must], size - len(must)))
    assert len(_groups(got, numa)) == best
