"""The static memory policy: the kubelet's policy_static_test cases, as data of our own,
plus the fixture machines, hwagent's additions (spread pages, per-node split) and refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.contracts.hints import TopologyHint
from agent.contracts.memory import MemoryBlock, MemoryRefused, MemoryRequest
from agent.memory.policy import Assignment, Capacity, StaticPolicy, build_capacity, fmt_bytes
from agent.memory.sysfs import read_memory

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "memory"
MB = 1 << 20
GB = 1 << 30
HP1G = "hugepages-1Gi"
HP2M = "hugepages-2Mi"


def machine(nodes: int, memory: int = 2 * GB, reserved: int = 512 * MB, **pools: int) -> dict[int, dict[str, Capacity]]:
    """``nodes`` nodes of ``memory`` with ``reserved`` of it for the system; ``pools``: resource -> bytes per node
    (the pool is taken out of allocatable memory, as upstream; totals here are the memory left besides it)."""
    caps: dict[int, dict[str, Capacity]] = {}
    for n in range(nodes):
        t = {"memory": Capacity(memory, reserved, memory - reserved)}
        for res, size in pools.items():
            name = res.replace("_", "-")
            t[name] = Capacity(size, 0, size, 2 * MB if name == HP2M else GB)
        caps[n] = t
    return caps


def held(uid: str, nodes: tuple[int, ...], **sizes: int) -> Assignment:
    """An existing assignment, split fill-first over ``nodes`` as the policy would have (per-node amounts given
    as ``resource=[(node, bytes), ...]`` or a total split evenly)."""
    blocks = []
    for res, size in sizes.items():
        name = res.replace("_", "-")
        each = size // len(nodes)
        blocks.append(MemoryBlock(name, size, nodes, tuple((n, each) for n in nodes)))
    return Assignment(uid, "container1", tuple(blocks), frozenset(nodes))


def hint(*nodes: int, preferred: bool = True) -> TopologyHint:
    return TopologyHint(frozenset(nodes), preferred)


# (description, machine, existing assignments, request, expected hints) — the upstream
# GetTopologyHints table's situations, with our own numbers
HINT_CASES: list[tuple[str, Any, list[Assignment], dict[str, int], list[TopologyHint] | None]] = [
    ("existing assignment: its own affinity again, preferred",
     machine(2, hugepages_1Gi=GB), [held("pod1", (0,), memory=GB, hugepages_1Gi=GB)],
     {"memory": GB, HP1G: GB}, [hint(0)]),
    ("a new container avoids the two-node group in use and prefers single free nodes",
     machine(4, hugepages_1Gi=GB), [held("pod1", (0, 1), memory=2 * GB, hugepages_1Gi=2 * GB)],
     {"memory": GB, HP1G: GB}, [hint(2), hint(3), hint(2, 3, preferred=False)]),
    ("a single node would do, but only the group in use has room: not preferred",
     machine(2, hugepages_2Mi=20 * MB), [
         Assignment("pod1", "container1", (
             MemoryBlock("memory", 2 * GB, (0, 1), ((0, 1536 * MB), (1, 512 * MB))),
             MemoryBlock(HP2M, 24 * MB, (0, 1), ((0, 20 * MB), (1, 4 * MB)))), frozenset({0, 1}))],
     {"memory": GB, HP2M: 16 * MB}, [hint(0, 1, preferred=False)]),
    ("nothing requested: no preference", machine(2), [], {}, None),
    ("too big for any group: no hints", machine(2), [], {"memory": 4 * GB}, []),
    ("a node that holds a single-node allocation is not joined into a group",
     machine(2), [held("pod1", (0,), memory=GB)], {"memory": 2 * GB}, []),
    ("bigger than one node: the pair, preferred (no smaller group could ever hold it)",
     machine(2), [], {"memory": 2 * GB}, [hint(0, 1)]),
]


@pytest.mark.parametrize("desc,caps,existing,requests,expected", HINT_CASES, ids=[c[0] for c in HINT_CASES])
def test_hints(desc: str, caps: Any, existing: list[Assignment], requests: dict[str, int],
               expected: list[TopologyHint] | None) -> None:
    p = StaticPolicy(caps)
    assert p.restore(existing) == []
    uid = existing[0].pod_uid if "existing assignment" in desc else "pod2"
    assert p.hints(MemoryRequest(uid, "container1", requests)) == expected


# (description, machine, existing, request, topology manager hint, expected blocks)
ALLOCATE_CASES: list[tuple[str, Any, list[Assignment], dict[str, int], TopologyHint | None, list[MemoryBlock]]] = [
    ("no hint: the best default, one node",
     machine(2, hugepages_1Gi=GB), [], {"memory": GB, HP1G: GB}, None,
     [MemoryBlock("memory", GB, (0,), ((0, GB),)), MemoryBlock(HP1G, GB, (0,), ((0, GB),))]),
    ("the merged hint is used as given",
     machine(2, hugepages_1Gi=GB), [], {"memory": GB, HP1G: GB}, hint(1),
     [MemoryBlock("memory", GB, (1,), ((1, GB),)), MemoryBlock(HP1G, GB, (1,), ((1, GB),))]),
    ("a hint too small is extended to the best group that contains it (not preferred asked, not preferred given)",
     machine(2), [], {"memory": 2 * GB}, hint(0, preferred=False),
     [MemoryBlock("memory", 2 * GB, (0, 1), ((0, 1536 * MB), (1, 512 * MB)))]),
    ("the group in use is filled first-fit in node order",
     machine(2), [held("pod1", (0, 1), memory=2 * GB)], {"memory": GB}, hint(0, 1, preferred=False),
     [MemoryBlock("memory", GB, (0, 1), ((0, 512 * MB), (1, 512 * MB)))]),
]


@pytest.mark.parametrize("desc,caps,existing,requests,th,expected", ALLOCATE_CASES, ids=[c[0] for c in ALLOCATE_CASES])
def test_allocate(desc: str, caps: Any, existing: list[Assignment], requests: dict[str, int],
                  th: TopologyHint | None, expected: list[MemoryBlock]) -> None:
    p = StaticPolicy(caps)
    p.restore(existing)
    got = p.allocate(MemoryRequest("pod2", "container2", requests, hint=th))
    assert list(got) == expected
    assert p.blocks("pod2", "container2") == got


# refusals: (description, machine, existing, request, hint, reason, words the line must hold)
REFUSALS: list[tuple[str, Any, list[Assignment], dict[str, int], TopologyHint | None, str, list[str]]] = [
    ("more than any group", machine(2), [], {"memory": 4 * GB}, None, "insufficient_memory",
     ["asks 4Gi", "node 0: 1.5 GiB memory", "node 1: 1.5 GiB memory"]),
    ("unknown page size", machine(2, hugepages_2Mi=64 * MB), [], {"hugepages-4Mi": 8 * MB}, None,
     "unknown_page_size", ["no 4Mi pages", "hugepages-2Mi"]),
    ("not configured anywhere", machine(2, hugepages_2Mi=0), [], {HP2M: 8 * MB}, None, "not_configured",
     ["node 0: 0 × 2 MiB pages", "node 1: 0 × 2 MiB pages", "hugepages-2048kB/nr_hugepages"]),
    ("not configured on the chosen node",
     {0: {"memory": Capacity(2 * GB, 0, 2 * GB), HP2M: Capacity(64 * MB, 0, 64 * MB, 2 * MB)},
      1: {"memory": Capacity(2 * GB, 0, 2 * GB), HP2M: Capacity(0, 0, 0, 2 * MB)}},
     [], {"memory": GB, HP2M: 8 * MB}, hint(1), "not_configured", ["configured on NUMA nodes {1}", "node 0: 32 × 2 MiB pages"]),
    ("not a whole number of pages", machine(2, hugepages_2Mi=64 * MB), [], {HP2M: 3 * MB}, None, "partial_page",
     ["3Mi", "2Mi pages"]),
    ("a hint that cannot hold it nor be extended (node 0 is single-node bound)", machine(2),
     [held("pod1", (0,), memory=GB)], {"memory": GB}, hint(0), "insufficient_memory",
     ["NUMA nodes {0}", "node 0: 512 MiB memory", "node 1: 1.5 GiB memory"]),
]


@pytest.mark.parametrize("desc,caps,existing,requests,th,reason,words", REFUSALS, ids=[c[0] for c in REFUSALS])
def test_refusals_change_nothing(desc: str, caps: Any, existing: list[Assignment], requests: dict[str, int],
                                 th: TopologyHint | None, reason: str, words: list[str]) -> None:
    p = StaticPolicy(caps)
    p.restore(existing)
    before = (p.nodes(), dict(p.assignments), dict(p.cells), dict(p.count))
    with pytest.raises(MemoryRefused) as e:
        p.allocate(MemoryRequest("pod2", "c", requests, hint=th))
    assert e.value.reason == reason
    assert "\n" not in str(e.value)
    for w in words:
        assert w in str(e.value)
    assert (p.nodes(), dict(p.assignments), dict(p.cells), dict(p.count)) == before


def test_release_gives_back_exactly_and_frees_the_group() -> None:
    p = StaticPolicy(machine(2))
    empty = p.nodes()
    p.allocate(MemoryRequest("a", "c", {"memory": 2 * GB}))
    assert p.hints(MemoryRequest("b", "c", {"memory": GB})) == [hint(0, 1, preferred=False)]
    assert p.remove_pod("a") is True
    assert p.remove_pod("a") is False
    assert p.nodes() == empty
    assert p.hints(MemoryRequest("b", "c", {"memory": GB}))[0] == hint(0)  # type: ignore[index]


def test_spread_hugepages_split_evenly_over_nodes_with_pages() -> None:
    caps = build_capacity(read_memory(FIX / "numa8" / "sys"), {})
    p = StaticPolicy(caps)
    (b,) = p.allocate(MemoryRequest("a", "c", {HP2M: 13 * 2 * MB}, spread_hugepages=True))
    assert b.numa_nodes == (0, 1, 2, 3, 4, 5)  # 6 and 7 have no pages configured
    assert dict(b.per_node) == {0: 6 * MB, 1: 4 * MB, 2: 4 * MB, 3: 4 * MB, 4: 4 * MB, 5: 4 * MB}
    assert sum(s for _, s in b.per_node) == b.size
    # spread pages bind no group: a single-node request may still use node 0
    assert p.hints(MemoryRequest("b", "c", {"memory": GB}))[0] == hint(0)  # type: ignore[index]


@pytest.mark.parametrize("tree,nodes", [("numa2", 2), ("numa4", 4), ("numa8", 8)])
def test_fixture_machines_single_node_first(tree: str, nodes: int) -> None:
    caps = build_capacity(read_memory(FIX / tree / "sys"), {0: {"memory": GB}})
    p = StaticPolicy(caps)
    req = MemoryRequest("a", "c", {"memory": 512 * MB, HP2M: 64 * MB})
    hints = p.hints(req)
    assert hints is not None
    assert [h.nodes for h in hints if h.preferred] == [(n,) for n in range(nodes) if caps[n][HP2M].allocatable]
    blocks = p.allocate(req)
    assert [b.numa_nodes for b in blocks] == [(0,), (0,)]
    node0 = {n.resource: n for n in p.nodes() if n.node == 0}
    assert node0["memory"].system_reserved == GB and node0["memory"].allocated == 512 * MB
    assert node0[HP2M].free == node0[HP2M].allocatable - 64 * MB


def test_memory_only_nodes_are_allocatable_through_hints() -> None:
    caps = build_capacity(read_memory(FIX / "memtiers" / "sys"), {})
    p = StaticPolicy(caps)
    hints = p.hints(MemoryRequest("a", "c", {"memory": 400 * MB}))
    assert hints is not None and hint(4) in hints


def test_capacity_takes_hugepages_out_of_memory_and_splits_the_node_level_reservation() -> None:
    m = read_memory(FIX / "numa2" / "sys")
    caps = build_capacity(m, {1: {"memory": 256 * MB}}, {HP2M: 6 * MB})
    assert caps[0][HP2M].system_reserved == 4 * MB and caps[1][HP2M].system_reserved == 2 * MB
    pools1 = caps[1][HP2M].total + caps[1][HP1G].total
    assert caps[1]["memory"].allocatable == m.node(1).mem_total - 256 * MB - pools1  # type: ignore[union-attr]


@pytest.mark.parametrize("reserved,system,words", [
    ({5: {"memory": GB}}, {}, "node 5"),
    ({0: {"hugepages-4Mi": 4 * MB}}, {}, "no hugepages-4Mi pool"),
    ({0: {"memory": 64 * GB}}, {}, "reserved for the system"),
    ({}, {HP2M: 4 * GB}, "more than"),
    ({}, {HP2M: 3 * MB}, "whole number"),
])
def test_capacity_refuses_reservations_the_machine_cannot_hold(reserved: Any, system: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        build_capacity(read_memory(FIX / "numa2" / "sys"), reserved, system)


def test_restore_leaves_out_what_no_longer_fits() -> None:
    small = machine(1)
    a = held("gone", (1,), memory=GB)
    b = held("big", (0,), memory=1536 * MB)
    c = held("late", (0,), memory=GB)
    p = StaticPolicy(small)
    dropped = p.restore([a, b, c])
    assert [(x.pod_uid, "node 1" in why or "free" in why) for x, why in dropped] == [("gone", True), ("late", True)]
    assert set(p.pod_uids()) == {"big"}


def test_fmt_bytes() -> None:
    assert [fmt_bytes(x) for x in (0, 512 * MB, 2 * GB, 1536 * MB, 100)] == ["0", "512Mi", "2Gi", "1536Mi", "100"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["alloc", "free"]), st.integers(0, 5), st.integers(1, 12),
                          st.integers(0, 4), st.booleans()), max_size=30))
def test_accounting_always_matches_the_blocks(ops: list[tuple[str, int, int, int, bool]]) -> None:
    """Whatever the sequence, allocated per node = the sum of the blocks' splits, never above allocatable,
    and the groups obey the rules (a multi-node group's nodes all name that group)."""
    p = StaticPolicy(machine(3, hugepages_2Mi=64 * MB))
    for op, pod, mem_256, pages, spread in ops:
        if op == "free":
            p.remove_pod(str(pod))
            continue
        req = MemoryRequest(str(pod), "c", {"memory": mem_256 * 256 * MB, HP2M: pages * 2 * MB},
                            spread_hugepages=spread)
        try:
            p.allocate(req)
        except MemoryRefused:
            pass
    want: dict[tuple[int, str], int] = {}
    for a in p.assignments.values():
        for node, res, size in a.usage():
            want[(node, res)] = want.get((node, res), 0) + size
        if len(a.affinity) > 1:
            assert all(p.cells[n] == a.affinity for n in a.affinity)
    for n in p.nodes():
        assert n.allocated == want.get((n.node, n.resource), 0)
        assert 0 <= n.allocated <= n.allocatable
