"""Pure device choice (kubelet devicesToAllocate cases)."""

from __future__ import annotations

import asyncio

import pytest

from agent.contracts.devices import Device
from agent.devicemanager.selection import AllocationError, filter_by_affinity, select_devices


def devs(*specs: tuple[str, tuple[int, ...]], healthy: bool = True) -> dict[str, Device]:
    return {i: Device(i, healthy, numa) for i, numa in specs}


def choose(devices, required, *, available=None, reusable=(), hint=None, preferred=None):
    avail = frozenset(available if available is not None else devices)
    return asyncio.run(
        select_devices(resource="r", required=required, devices=devices, available=avail,
                       reusable=reusable, hint=hint, preferred=preferred)
    )


UPSTREAM = devs(("dev1", (1,)), ("dev2", (1, 2)), ("dev3", (2,)), ("dev4", (2,)), ("dev5", ()))


def test_filter_by_affinity_upstream_case():
    """TestFilterByAffinity: hint {2}; a multi-node device goes to the first node visited."""
    assert filter_by_affinity({"dev1", "dev2"}, UPSTREAM, frozenset({2})) == ({"dev2"}, {"dev1"}, set())
    aligned, unaligned, none = filter_by_affinity(set(UPSTREAM), UPSTREAM, frozenset({2}))
    assert (aligned, unaligned, none) == ({"dev2", "dev3", "dev4"}, {"dev1"}, {"dev5"})


def test_filter_without_hint_or_topology_is_all_no_affinity():
    assert filter_by_affinity({"dev1"}, UPSTREAM, None) == (set(), set(), {"dev1"})
    flat = devs(("a", ()), ("b", ()))
    assert filter_by_affinity({"a", "b"}, flat, frozenset({0})) == (set(), set(), {"a", "b"})


def test_hint_nodes_with_fewer_devices_are_visited_first():
    d = devs(("x", (0, 1)), ("a", (0,)), ("b", (0,)), ("c", (1,)))
    # hint {0,1}: node 1 has fewer devices, so the shared device counts for node 1; all aligned anyway
    assert filter_by_affinity(set(d), d, frozenset({0, 1}))[0] == set(d)


@pytest.mark.parametrize(
    "hint,required,expect",
    [
        (frozenset({0}), 2, {"a0", "b0"}),
        (frozenset({0}), 4, {"a0", "b0", "c0", "a1"}),  # 3 on 0, spill 1
        (None, 1, {"a0"}),
        (frozenset({1}), 1, {"a1"}),
    ],
)
def test_topology_aligned_allocation(hint, required, expect):
    d = devs(("a0", (0,)), ("b0", (0,)), ("c0", (0,)), ("a1", (1,)), ("b1", (1,)), ("c1", (1,)))
    assert set(choose(d, required, hint=hint)) == expect


def test_reusable_first_then_free():
    d = devs(("a", (0,)), ("b", (0,)), ("c", (0,)))
    assert choose(d, 2, available={"c"}, reusable={"b"}) == ["b", "c"]
    # an unhealthy reusable device is not handed on
    d["b"] = Device("b", False, (0,))
    with pytest.raises(AllocationError):
        choose(d, 2, available={"c"}, reusable={"b"})


def test_too_few_devices_message():
    d = devs(("a", (0,)), ("b", (0,)))
    with pytest.raises(AllocationError) as e:
        choose(d, 3)
    assert str(e.value) == "requested number of devices unavailable for r. Requested: 3, Available: 2"
    assert e.value.code == "RESOURCE_EXHAUSTED"


def test_preferred_parameters_and_advisory_answer():
    """TestGetPreferredAllocationParameters shape: reusable devices are must-include and offered."""
    d = devs(*[(f"d{i}", (0,)) for i in range(8)])
    seen = []

    async def pref(available, must, size):
        seen.append((set(available), set(must), size))
        return ["zzz", "d7", "d6", "d5"]  # "zzz" was never offered: ignored

    got = choose(d, 4, available={f"d{i}" for i in range(2, 8)}, reusable={"d0", "d1"}, preferred=pref)
    assert seen == [({f"d{i}" for i in range(8)}, {"d0", "d1"}, 4)]
    assert got == ["d0", "d1", "d5", "d6"]  # the advisory answer, taken in id order


def test_preferred_only_over_aligned_when_enough_aligned():
    d = devs(("a0", (0,)), ("b0", (0,)), ("c0", (0,)), ("a1", (1,)))
    seen = []

    async def pref(available, must, size):
        seen.append(set(available))
        return ["a1", "c0"]  # a1 is not aligned: dropped, topped up from aligned

    got = choose(d, 2, hint=frozenset({0}), preferred=pref)
    assert seen == [{"a0", "b0", "c0"}]
    assert got == ["c0", "a0"]


def test_preferred_empty_answer_falls_back():
    d = devs(("a", (0,)), ("b", (1,)))

    async def pref(available, must, size):
        return []

    assert choose(d, 1, preferred=pref) == ["a"]

