"""The claim allocator's properties (hypothesis) and its hints for the topology manager."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.dra.allocator import AllocationRefused, allocate, claim_hints
from agent.dra.catalog import DraDevice
from agent.dra.cel import check
from agent.dra.claims import Constraint, DeviceClass, DeviceRequest, ResourceClaim
from tests.unit.dra.fixture_devices import TWO_NODES, snapshot_devices

check("true")  # celpy raises the recursion limit on first use: before hypothesis watches it
NUMA0 = 'has(device.attributes["hwagent.io"].numaNode) && device.attributes["hwagent.io"].numaNode == 0'
CLASSES = {
    "any": DeviceClass("any"),
    "numa0": DeviceClass("numa0", (NUMA0,)),
    "fast": DeviceClass("fast", ('device.attributes["example.com"].fast',)),
}
ROOT = "example.com/root"


@st.composite
def node_devices(draw) -> list[DraDevice]:
    n = draw(st.integers(1, 7))
    out = []
    for i in range(n):
        numa = draw(st.sampled_from([0, 1, None]))
        attrs = {"example.com/fast": draw(st.booleans())}
        if numa is not None:
            attrs["hwagent.io/numaNode"] = numa
        if draw(st.booleans()):
            attrs[ROOT] = draw(st.sampled_from(["a", "b"]))
        out.append(DraDevice("hwagent.io", "node/x", f"d{i}", attrs, {}, numa, f"d{i}", "x"))
    return out


@st.composite
def claims(draw, uid: str) -> ResourceClaim:
    reqs = []
    for i in range(draw(st.integers(1, 2))):
        mode = draw(st.sampled_from(["ExactCount", "ExactCount", "All"]))
        reqs.append(DeviceRequest(f"r{i}", draw(st.sampled_from(sorted(CLASSES))), (), mode,
                                  0 if mode == "All" else draw(st.integers(1, 3))))
    cons: tuple[Constraint, ...] = ()
    if draw(st.booleans()):
        cons = (Constraint((), draw(st.sampled_from([ROOT, "hwagent.io/numaNode"]))),)
    return ResourceClaim("ns", uid, uid, tuple(reqs), cons)


def _matching(claim, req, devices):
    from agent.dra.cel import device_activation, matches

    exprs = CLASSES[req.device_class].selectors
    return [d for d in devices if all(matches(e, device_activation(d.driver, d.attributes, d.capacity)) for e in exprs)]


def _exists(claim, devices, held) -> bool:
    """Brute force: is there any valid allocation? (small cases only)"""
    free = [d for d in devices if d.key not in held]
    options = []
    for req in claim.requests:
        m = _matching(claim, req, devices)
        if req.mode == "All":
            if not m or any(d.key in held for d in m):
                return False
            options.append([tuple(m)])
        else:
            options.append(list(itertools.combinations([d for d in m if d.key not in held or d in free], req.count)))
    for pick in itertools.product(*options):
        flat = [d for combo in pick for d in combo]
        if len({d.key for d in flat}) != len(flat):
            continue
        ok = True
        for c in claim.constraints:
            vals = {d.attributes.get(c.match_attribute, object()) for d in flat}
            if len(vals) != 1 or any(c.match_attribute not in d.attributes for d in flat):
                ok = False
        if ok:
            return True
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(devices=node_devices(), data=st.data())
def test_allocations_are_exclusive_counted_and_constrained(devices, data) -> None:
    held: dict = {}
    for k in range(3):
        claim = data.draw(claims(f"c{k}"))
        before = dict(held)
        try:
            res = allocate(claim, CLASSES, devices, held)
        except AllocationRefused:
            assert held == before  # refusal changes nothing
            assert not _exists(claim, devices, held), "refused although an allocation exists"
            continue
        by_key = {d.key: d for d in devices}
        got = [by_key[(r.driver, r.pool, r.device)] for r in res]
        # never two claims on one device, never one device twice in a claim
        assert len({d.key for d in got}) == len(got)
        assert not any(d.key in held for d in got)
        for req in claim.requests:
            mine = [by_key[(r.driver, r.pool, r.device)] for r in res if r.request == req.name]
            if req.mode == "All":
                assert {d.key for d in mine} == {d.key for d in _matching(claim, req, devices)}
            else:
                assert len(mine) == req.count
            assert all(d in _matching(claim, req, devices) for d in mine)
        for c in claim.constraints:
            assert all(c.match_attribute in d.attributes for d in got)
            assert len({d.attributes[c.match_attribute] for d in got}) == 1
        held.update({d.key: claim.uid for d in got})


def test_numa_preference_and_hints_on_a_real_snapshot(hwloc_extract) -> None:
    devices = snapshot_devices(hwloc_extract(TWO_NODES))
    nets = DeviceClass("net", ('device.attributes["hwagent.io"].resource == "example.com/net"',))
    on1 = [d for d in devices if d.resource == "example.com/net" and d.numa_node == 1]
    claim = ResourceClaim("ns", "c", "u1", (DeviceRequest("nic", "net", (), "ExactCount", 1),))
    (res,) = allocate(claim, {"net": nets}, devices, {}, numa=frozenset({1}))
    assert res.device in {d.name for d in on1}
    hints = claim_hints([claim], {"net": nets}, devices, {}, [0, 1])
    assert hints is not None and (frozenset({0}), True) in hints and (frozenset({1}), True) in hints
    # two NICs on one root complex: only node 0 has two
    two = ResourceClaim("ns", "c", "u2", (DeviceRequest("nic", "net", (), "ExactCount", 2),),
                        (Constraint((), "resource.kubernetes.io/pcieRoot"),))
    got = allocate(two, {"net": nets}, devices, {})
    roots = {next(d for d in devices if d.name == r.device).attributes["resource.kubernetes.io/pcieRoot"] for r in got}
    assert len(roots) == 1
    assert [m for m, pref in claim_hints([two], {"net": nets}, devices, {}, [0, 1]) or () if pref] == [frozenset({0})]
    # two claims of one NIC each and the node-1 NIC held: both fit on node 0 only when node 0 has two free
    held = {d.key: "other" for d in on1}
    one = ResourceClaim("ns", "c", "u3", (DeviceRequest("nic", "net", (), "ExactCount", 1),))
    on0 = [d for d in devices if d.resource == "example.com/net" and d.numa_node == 0]
    got = claim_hints([one, two], {"net": nets}, devices, held, [0, 1])
    assert got is None if len(on0) < 3 else [m for m, p in got if p] == [frozenset({0})]
    # a claim that fits nowhere: no preference, so the allocation's own refusal is what the user reads
    ten = ResourceClaim("ns", "c", "u4", (DeviceRequest("nic", "net", (), "ExactCount", 10),))
    assert claim_hints([ten], {"net": nets}, devices, {}, [0, 1]) is None


def test_refusals_say_why() -> None:
    d = [DraDevice("hwagent.io", "p", "a", {"hwagent.io/numaNode": 0}, {}, 0, "a", "x")]
    with pytest.raises(AllocationRefused, match="DeviceClass 'nope' is not defined"):
        allocate(ResourceClaim("ns", "c", "u", (DeviceRequest("r", "nope"),)), CLASSES, d, {})
    with pytest.raises(AllocationRefused, match="needs 2 device"):
        allocate(ResourceClaim("ns", "c", "u", (DeviceRequest("r", "any", (), "ExactCount", 2),)), CLASSES, d, {})
    with pytest.raises(AllocationRefused, match="held by claim other"):
        allocate(ResourceClaim("ns", "c", "u", (DeviceRequest("r", "any", (), "All", 0),)), CLASSES, d,
                 {d[0].key: "other"})
    with pytest.raises(AllocationRefused, match="failed on device a"):
        allocate(ResourceClaim("ns", "c", "u", (DeviceRequest("r", "fast"),)), CLASSES, d, {})
