"""Property tests of the merge (hypothesis), on machines of one to five NUMA nodes.

What "the merge never returns a mask some provider cannot satisfy" means in the
kubelet's semantics has to be stated with care, because it is *not* true of
every result:

* A hint is a set of nodes a provider can allocate the resource from; a
  preferred hint is one of the narrowest such sets. A provider is satisfied by a
  merged mask M when it can allocate inside M with a placement it prefers.
* When the merged hint is preferred (the only results restricted and
  single-numa-node admit), every resource that gave hints offered a *preferred*
  hint whose mask is exactly M, or a preferred "any" hint: that is the kubelet's
  rule that a permutation is preferred only when all its masks are equal. So
  every provider can be handed M and allocate there as it prefers. Under
  single-numa-node, M is additionally one node (or "any").
* When the merged hint is not preferred (only best-effort admits it), M is the
  AND of one hint per resource, so it lies *inside* some hint of every resource
  (M ⊆ h), but a provider whose narrowest placement needs two nodes is not
  satisfiable within a one-node M: {0} ∧ {0,1} = {0}, not preferred. The only
  guarantee is M ⊆ h for some h of each resource, and M is not empty; when no
  permutation has a common node, M is all nodes (the kubelet's fallback).

Beyond that: the merge equals a literal sequential model of the kubelet's
(kubelet_reference.py, itself checked against the kubelet's tables); it does
not depend on the order of providers, resources or hints (the kubelet iterates
Go maps, whose order is random); and admit() is all or nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.topologymanager import TopologyManager, TopologyManagerConfig
from agent.contracts.hints import TopologyHint

from .fakes import FakeProvider, Pod, ProviderFailure
from .kubelet_reference import Reference

POLICIES = ("best-effort", "restricted", "single-numa-node")


@st.composite
def machines(draw):
    n = draw(st.integers(1, 5))
    nodes = list(range(n))
    dist = {a: {b: (10 if a == b else draw(st.integers(11, 40))) for b in nodes} for a in nodes}
    return nodes, dist


BOOLEANS = st.booleans()


def hints_for(nodes, preferred=BOOLEANS):
    masks = st.one_of(
        st.none(),
        st.frozensets(st.sampled_from(nodes), min_size=1),
        st.just(frozenset()),  # a degenerate hint; the merge must skip what it produces
    )
    hint = st.builds(TopologyHint, masks, preferred)
    hint_list = st.one_of(st.none(), st.just([]), st.lists(hint, min_size=1, max_size=4))
    provider = st.dictionaries(st.sampled_from(["cpu", "memory", "gpu", "nic"]), hint_list, max_size=2)
    return st.lists(provider, max_size=3)


@st.composite
def scenarios(draw):
    nodes, dist = draw(machines())
    providers = draw(hints_for(nodes))
    policy = draw(st.sampled_from(POLICIES))
    closest = draw(st.booleans())
    return nodes, dist, providers, policy, closest


def manager(nodes, dist, policy, closest) -> TopologyManager:
    return TopologyManager(TopologyManagerConfig(policy=policy, prefer_closest_numa_nodes=closest), nodes, dist)


def resource_lists(providers):
    """The flattened per-resource hint lists, as the merge sees them."""
    out = []
    for p in providers:
        for hints in p.values():
            out.append(hints)
    return out


def to_ref(providers):
    return [
        {r: (None if hs is None else [(None if h.affinity is None else sum(1 << n for n in h.affinity), h.preferred)
                                      for h in hs]) for r, hs in p.items()}
        for p in providers
    ]


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_merge_equals_the_sequential_kubelet_model(s):
    nodes, dist, providers, policy, closest = s
    d = manager(nodes, dist, policy, closest).merge(providers)
    (mask, pref), admit = Reference(nodes, dist, prefer_closest=closest).merge(policy, to_ref(providers))
    want = None if mask is None else frozenset(n for n in nodes if mask >> n & 1)
    assert (d.hint.affinity, d.hint.preferred, d.admit) == (want, pref, admit)


@settings(max_examples=200, deadline=None)
@given(machines().flatmap(lambda m: st.tuples(st.just(m), hints_for(m[0], preferred=st.just(False)))),
       st.booleans())
def test_merge_of_non_preferred_hints_equals_the_sequential_kubelet_model(m_hints, closest):
    """Only non-preferred hints: every example exercises the kubelet's steering
    towards bestNonPreferredAffinityCount, which mixed hints rarely reach."""
    (nodes, dist), providers = m_hints
    d = manager(nodes, dist, "best-effort", closest).merge(providers)
    (mask, pref), _ = Reference(nodes, dist, prefer_closest=closest).merge("best-effort", to_ref(providers))
    assert (d.hint.affinity, d.hint.preferred) == (frozenset(n for n in nodes if mask >> n & 1), pref)


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_a_preferred_result_is_exactly_satisfiable_by_every_resource(s):
    nodes, dist, providers, policy, closest = s
    d = manager(nodes, dist, policy, closest).merge(providers)
    if not d.hint.preferred:
        return
    merged = frozenset(nodes) if d.hint.affinity is None else d.hint.affinity
    if policy == "single-numa-node":
        assert d.hint.affinity is None or len(d.hint.affinity) == 1
    for hints in resource_lists(providers):
        if hints is None:
            continue
        assert hints != [], "a resource nobody can place never yields a preferred result"
        assert any(h.preferred and (h.affinity is None or h.affinity == merged) for h in hints), (hints, merged)


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_a_non_preferred_result_lies_inside_a_hint_of_every_resource_or_is_the_fallback(s):
    nodes, dist, providers, policy, closest = s
    if policy == "single-numa-node":
        policy = "best-effort"
    d = manager(nodes, dist, policy, closest).merge(providers)
    if d.hint.preferred:
        return
    merged = d.hint.affinity
    assert merged, "never an empty mask"
    if merged == frozenset(nodes):
        return  # the fallback, or a permutation that genuinely spans every node
    for hints in resource_lists(providers):
        if not hints:
            continue
        assert any(h.affinity is None or merged <= h.affinity for h in hints), (hints, merged)


def _aligned(lists, masks) -> bool:
    """Whether some mask (or "any" everywhere) is offered, preferred, by every resource."""
    for hints in lists:
        if hints == []:
            return False
    real = [hs for hs in lists if hs is not None]
    if all(any(h.preferred and h.affinity is None for h in hs) for hs in real):
        return True
    return any(
        all(any(h.preferred and (h.affinity is None or h.affinity == m) for h in hs) for hs in real)
        for m in masks
    )


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_restricted_and_single_numa_node_admit_exactly_when_an_aligned_placement_exists(s):
    """An independent characterisation of admission, by brute force over all masks."""
    nodes, dist, providers, _, closest = s
    lists = resource_lists(providers)
    subsets = [frozenset(c) for k in range(1, len(nodes) + 1) for c in itertools.combinations(nodes, k)]
    assert manager(nodes, dist, "restricted", closest).merge(providers).admit is _aligned(lists, subsets)
    singles = [frozenset({n}) for n in nodes]
    single_lists = [
        None if hs is None else [h for h in hs if h.affinity is None or len(h.affinity) == 1]
        for hs in lists
    ]
    # under single-numa-node only one-node (and "any") hints take part; a resource
    # left with none cannot be aligned, like one that gave an empty list
    expected = _aligned(single_lists, singles)
    assert manager(nodes, dist, "single-numa-node", closest).merge(providers).admit is expected


@settings(max_examples=200, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_the_decision_does_not_depend_on_the_order_of_providers_resources_or_hints(s, rnd: random.Random):
    nodes, dist, providers, policy, closest = s
    tm = manager(nodes, dist, policy, closest)
    shuffled = []
    for p in providers:
        items = list(p.items())
        rnd.shuffle(items)
        shuffled.append({r: (None if hs is None else rnd.sample(hs, len(hs))) for r, hs in items})
    rnd.shuffle(shuffled)
    a, b = tm.merge(providers), tm.merge(shuffled)
    assert (a.hint, a.admit) == (b.hint, b.admit)


@settings(max_examples=150, deadline=None)
@given(
    machines(),
    st.sampled_from(POLICIES + ("none",)),
    st.sampled_from(["container", "pod"]),
    st.data(),
)
def test_decide_places_every_container_or_raises(machine, policy, scope, data):
    nodes, dist = machine
    containers = data.draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
    gen = hints_for(nodes)
    providers = []
    for i in range(data.draw(st.integers(1, 3))):
        per_container = {c: data.draw(gen.map(lambda ps: ps[0] if ps else {})) for c in containers}
        fail = data.draw(st.frozensets(st.sampled_from(containers), max_size=1))
        providers.append(FakeProvider(f"p{i}", hints=per_container, pod_level=per_container[containers[0]],
                                      fail_place=fail))
    tm = TopologyManager(TopologyManagerConfig(policy=policy, scope=scope), nodes, dist)
    pod = Pod("uid-1")
    try:
        got = asyncio.run(tm.decide(pod, containers, providers))
    except Exception as e:
        assert isinstance(e, ProviderFailure) or type(e).__name__ == "TopologyAffinityError"
        return
    assert list(got) == containers
    for p in providers:
        assert p.placed == {(pod.uid, c): got[c] for c in containers}
    if scope == "pod" or policy == "none":
        assert len(set(got.values())) == 1
