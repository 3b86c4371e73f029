"""The standalone allocator decides as Kubernetes' structured allocator does
(issue 33): every example of the issue as a table row, each with the verdict the
real allocator (k8s.io/dynamic-resource-allocation/structured) gives.

A row is: the pool's devices (name, attributes, capacities, in slice order),
the class's selectors, the claim's requests and constraints, the devices other
claims hold, and what must come out: the devices allocated, or a refusal whose
message matches.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent.dra import catalog as _catalog
from agent.dra.allocator import AllocationRefused, allocate
from agent.dra.catalog import DraDevice
from agent.dra.claims import Constraint, DeviceClass, DeviceRequest, ResourceClaim

#: a semantic version attribute; before issue 33 the catalog turned versions into strings
Version: Any = getattr(_catalog, "Version", str)
DRIVER = "hwagent.io"
POOL = "node1/example.com-x"
HW = 'device.attributes["hwagent.io"]'
CAP = 'device.capacity["hwagent.io"]'


def dev(name: str, capacity: dict[str, int] | None = None, **attrs: Any) -> DraDevice:
    numa = attrs.get("numaNode") if isinstance(attrs.get("numaNode"), int) else None
    return DraDevice(DRIVER, POOL, name, {f"{DRIVER}/{k}": v for k, v in attrs.items()},
                     {f"{DRIVER}/{k}": v for k, v in (capacity or {}).items()}, numa, name, "example.com/x")


@dataclass
class Case:
    devices: list[DraDevice]
    class_selectors: tuple[str, ...] = ()
    selectors: tuple[str, ...] = ()
    count: int = 1
    mode: str = "ExactCount"
    match: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    #: more requests after the first: (name, mode, count, selectors)
    more: tuple[tuple[str, str, int, tuple[str, ...]], ...] = ()
    #: the devices allocated (order-free), or None for a refusal
    want: set[str] | None = None
    #: for a refusal: what its message says
    refused: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def run(case: Case) -> set[str]:
    reqs = [DeviceRequest("r0", "cls", case.selectors, case.mode, case.count if case.mode == "ExactCount" else 0)]
    reqs += [DeviceRequest(n, "cls", s, m, c if m == "ExactCount" else 0) for n, m, c, s in case.more]
    claim = ResourceClaim("ns", "claim", "uid-1", tuple(reqs), tuple(Constraint((), a) for a in case.match))
    held = {d.key: "other-claim" for d in case.devices if d.name in case.held}
    got = allocate(claim, {"cls": DeviceClass("cls", case.class_selectors)}, case.devices, held,
                   case.extra.get("numa"))
    return {r.device for r in got}


def check(case: Case) -> None:
    if case.want is None:
        with pytest.raises(AllocationRefused, match=case.refused):
            got = run(case)
            print("allocated", got)
        return
    assert run(case) == case.want


# -- item 1: matchAttribute compares typed values ------------------------------------------------

MATCH = {
    "bool-vs-int": Case([dev("a", tier=True), dev("b", tier=1)], count=2, match=("hwagent.io/tier",),
                        refused="no set of free devices"),
    "version-vs-string": Case([dev("a", fw=Version("1.0.0")), dev("b", fw="1.0.0")], count=2,
                              match=("hwagent.io/fw",), refused="no set of free devices"),
    "int-vs-string": Case([dev("a", grp=1), dev("b", grp="1")], count=2, match=("hwagent.io/grp",),
                          refused="no set of free devices"),
    "same-version": Case([dev("a", fw=Version("1.0.0")), dev("b", fw=Version("1.0.0"))], count=2,
                         match=("hwagent.io/fw",), want={"a", "b"}),
    "same-bool": Case([dev("a", tier=True), dev("b", tier=True), dev("c", tier=1)], count=2,
                      match=("hwagent.io/tier",), want={"a", "b"}),
}


@pytest.mark.parametrize("name", sorted(MATCH))
def test_match_attribute_is_typed(name: str) -> None:
    check(MATCH[name])


# -- item 2: the Kubernetes CEL environment ----------------------------------------------------

TIB = 1 << 40
LIBS = {
    "quantity-compareTo": Case([dev("small", {"size": TIB // 2}), dev("big", {"size": 2 * TIB})],
                               selectors=(f'{CAP}.size.compareTo(quantity("1Ti")) >= 0',), want={"big"}),
    "quantity-isGreaterThan": Case([dev("small", {"size": 10}), dev("big", {"size": 2 * TIB})],
                                   selectors=(f'{CAP}.size.isGreaterThan(quantity("1.5Ti"))',), want={"big"}),
    "quantity-isLessThan-asInteger": Case(
        [dev("small", {"size": 512}), dev("big", {"size": TIB})],
        selectors=(f'{CAP}.size.isLessThan(quantity("1k")) && {CAP}.size.asInteger() == 512',), want={"small"}),
    "quantity-add-sub-float": Case(
        [dev("a", {"size": 1000})],
        selectors=(f'{CAP}.size.add(24).sub(quantity("1Ki")).asInteger() == 0 && '
                   f'{CAP}.size.asApproximateFloat() == 1000.0 && isQuantity("10Mi") && !isQuantity("ten")',),
        want={"a"}),
    "semver-isGreaterThan": Case([dev("old", firmware=Version("1.9.0")), dev("new", firmware=Version("2.1.0"))],
                                 selectors=(f'{HW}.firmware.isGreaterThan(semver("2.0.0"))',), want={"new"}),
    "semver-parts": Case([dev("a", firmware=Version("2.10.3-rc.1"))],
                         selectors=(f'{HW}.firmware.major() == 2 && {HW}.firmware.minor() == 10 && '
                                    f'{HW}.firmware.patch() == 3 && {HW}.firmware.compareTo(semver("2.10.3")) < 0 '
                                    f'&& {HW}.firmware.isLessThan(semver("2.10.3")) && isSemver("1.2.3") '
                                    '&& !isSemver("1.2")',), want={"a"}),
    "cel-bind": Case([dev("a", numaNode=1, kind="pci"), dev("b", numaNode=0, kind="pci")],
                     selectors=(f'cel.bind(hw, {HW}, hw.numaNode == 0 && hw.kind == "pci")',), want={"b"}),
    "strings-ext": Case(
        [dev("a", pciAddress="0000:3B:00.0"), dev("b", pciAddress="0000:5e:00.1")],
        selectors=(f'{HW}.pciAddress.lowerAscii().split(":")[1] == "3b" && {HW}.pciAddress.charAt(4) == ":" '
                   f'&& {HW}.pciAddress.indexOf(":") == 4 && {HW}.pciAddress.lastIndexOf(":") == 7 '
                   f'&& {HW}.pciAddress.substring(11) == "0" && {HW}.pciAddress.upperAscii() == "0000:3B:00.0" '
                   f'&& {HW}.pciAddress.replace("0", "x", 2) == "xx00:3B:00.0" && " a ".trim() == "a" '
                   '&& ["a", "b"].join("-") == "a-b"',), want={"a"}),
    "ip-cidr": Case([dev("a", addr="10.1.2.3"), dev("b", addr="192.168.0.1")],
                    selectors=(f'isIP({HW}.addr) && cidr("10.0.0.0/8").containsIP(ip({HW}.addr)) '
                               f'&& ip({HW}.addr).family() == 4',), want={"a"}),
    "two-var-exists": Case([dev("a", numaNode=1), dev("b", numaNode=0)],
                           selectors=(f'{HW}.exists(k, v, k == "numaNode" && v == 0)',), want={"b"}),
    "optional-select": Case([dev("a"), dev("b", numaNode=1)],
                            selectors=(f"{HW}.?numaNode.orValue(-1) == 1",), want={"b"}),
    "sets": Case([dev("a", kind="nvme")], selectors=(f'sets.contains(["nvme", "nic"], [{HW}.kind])',), want={"a"}),
}


@pytest.mark.parametrize("name", sorted(LIBS))
def test_kubernetes_cel_libraries(name: str) -> None:
    check(LIBS[name])


# -- item 3: CEL types as upstream -------------------------------------------------------------

TYPES = {
    # a capacity is a Quantity: ordering it against an int has no overload (a compile error upstream)
    "quantity-gt-int": Case([dev("a", {"size": 10 * TIB})], selectors=(f"{CAP}.size > 5000000000",),
                            refused="no matching overload for '_>_' applied to '\\(kubernetes.Quantity, int\\)'"),
    # ... even where evaluation would never reach it: cel-go checks types before evaluating
    "quantity-gt-int-short-circuited": Case([dev("a", {"size": 10 * TIB})], selectors=(f"false && {CAP}.size > 5",),
                                            refused="does not compile"),
    "sign-is-no-method": Case([dev("a", {"size": 10})], selectors=(f"{CAP}.size.sign() > 0",),
                              refused="no matching overload for 'sign'"),
    "undeclared-function-behind-or": Case([dev("a", kind="nvme")], selectors=(f"{HW}.kind.reverse() == 'x' || true",),
                                          refused="undeclared reference to 'reverse'"),
    "heterogeneous-list-literal": Case([dev("a", numaNode=0)], selectors=(f"[{HW}.numaNode, 3].min() < 3",),
                                       refused="expected type 'any' but found 'int'"),
    # a version is a semver: == against a string has no overload (a runtime error upstream)
    "semver-eq-string": Case([dev("a", firmware=Version("2.0.0"))], selectors=(f'{HW}.firmware == "2.0.0"',),
                             refused="no such overload"),
    # a bool is not an int: never equal, no device matches
    "bool-eq-int": Case([dev("a", sriovVF=True)], selectors=(f"{HW}.sriovVF == 1",), refused="needs 1 device"),
    # equality across types is false, not an error
    "eq-across-types": Case([dev("a", numaNode=1)], selectors=(f'!({HW}.numaNode == "1")',), want={"a"}),
    "ne-across-types": Case([dev("a", numaNode=1)], selectors=(f'{HW}.numaNode != "1"',), want={"a"}),
    "in-across-types": Case([dev("a", numaNode=1)], selectors=(f'{HW}.numaNode in [1.0, 2.0] && !({HW}.numaNode in ["1"])',), want={"a"}),
    # int/double comparisons are allowed
    "int-lt-double": Case([dev("a", numaNode=0), dev("b", numaNode=1)], selectors=(f"{HW}.numaNode < 0.5",),
                          want={"a"}),
    "int-eq-double": Case([dev("a", numaNode=1)], selectors=(f"{HW}.numaNode == 1.0",), want={"a"}),
    # ordering across other types stays an error
    "string-lt-int": Case([dev("a", kind="pci")], selectors=(f"{HW}.kind < 1",), refused="no such overload"),
    # a domain that the device does not have is an empty map: has() is false, no error
    "unknown-domain": Case([dev("a", numaNode=0)],
                           selectors=('!has(device.attributes["other.io"].numaNode)',), want={"a"}),
}


@pytest.mark.parametrize("name", sorted(TYPES))
def test_cel_types_as_upstream(name: str) -> None:
    check(TYPES[name])


# -- item 4: a selector that fails on one device ------------------------------------------------

NUMA_GE0 = (f"{HW}.numaNode >= 0",)
ERRORS = {
    # the search takes a-nvme before it ever evaluates b-loop, as upstream's does
    "error-after-the-answer": Case([dev("a-nvme", numaNode=0), dev("b-loop")], class_selectors=NUMA_GE0,
                                   want={"a-nvme"}),
    # held devices are skipped before selectors are evaluated
    "error-on-held-device": Case([dev("a-loop"), dev("b-nvme", numaNode=0)], class_selectors=NUMA_GE0,
                                 held=("a-loop",), want={"b-nvme"}),
    # a device the search must evaluate before it has an answer fails the claim, naming it
    "error-before-the-answer": Case([dev("a-loop"), dev("b-nvme", numaNode=0)], class_selectors=NUMA_GE0,
                                    refused="failed on device a-loop"),
    "error-when-unsatisfiable": Case([dev("a-nvme", numaNode=0), dev("b-loop")], class_selectors=NUMA_GE0,
                                     count=2, refused="failed on device b-loop"),
    # an All request evaluates every device of the pool, held or not
    "error-in-all": Case([dev("a-nvme", numaNode=0), dev("b-loop")], class_selectors=NUMA_GE0, mode="All",
                         held=("b-loop",), refused="failed on device b-loop"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_selector_errors_as_upstream(name: str) -> None:
    check(ERRORS[name])


# -- item 5: no step bound that refuses a satisfiable claim -------------------------------------

def iommu(n: int, groups: list[int]) -> list[DraDevice]:
    return [dev(f"d{i:02}", iommuGroup=g) for i, g in zip(range(n), groups, strict=True)]


SEARCH = {
    "last-four-share-a-group": Case(iommu(24, list(range(20)) + [99] * 4), count=4, match=("hwagent.io/iommuGroup",),
                                    want={"d20", "d21", "d22", "d23"}),
    "last-eight-of-32": Case(iommu(32, list(range(24)) + [99] * 8), count=8, match=("hwagent.io/iommuGroup",),
                             want={f"d{i}" for i in range(24, 32)}),
    # infeasible: two groups of 12, count 13: answered at once
    "two-groups-count-13": Case(iommu(24, [0] * 12 + [1] * 12), count=13, match=("hwagent.io/iommuGroup",),
                                refused="no set of free devices"),
    # two requests under one constraint, the second larger than any group but one
    "two-requests-one-group": Case(iommu(30, [i % 10 for i in range(25)] + [99] * 5), count=2,
                                   more=(("r1", "ExactCount", 3, ()),), match=("hwagent.io/iommuGroup",),
                                   want={f"d{i}" for i in range(25, 30)}),
}


@pytest.mark.parametrize("name", sorted(SEARCH))
def test_search_prunes_by_constraint(name: str) -> None:
    start = time.process_time()
    check(SEARCH[name])
    assert time.process_time() - start < 2.0, "the search must not be exhaustive here"


# -- what hwagent was already right about --------------------------------------------------------

KEPT = {
    # allocationMode All over zero devices is refused (Kubernetes 1.33+; 1.32 allocated nothing)
    "all-over-zero": Case([dev("a", kind="net")], selectors=(f'{HW}.kind == "pci"',), mode="All",
                          refused="All needs at least one"),
    # an ExactCount request that could take the device a later All request needs: backtrack
    "exact-then-all": Case([dev("a", kind="pci"), dev("b", kind="net")], count=1,
                           more=(("r1", "All", 0, (f'{HW}.kind == "pci"',)),), want={"a", "b"}),
    # an All request whose devices break a constraint with what an earlier request chose: upstream stops with
    # an error instead of trying the earlier request's other devices (1.32 and the current release alike)
    "all-breaks-constraint": Case([dev("a", grp=1), dev("b", grp=2)], count=1,
                                  more=(("r1", "All", 0, (f"{HW}.grp == 2",)),), match=("hwagent.io/grp",),
                                  refused="device b .*claim constraint would not be satisfied"),
}


@pytest.mark.parametrize("name", sorted(KEPT))
def test_kept_behaviour(name: str) -> None:
    check(KEPT[name])


# -- issue 33 follow-up: what the differential run found after the first fixes ---------------------

MANY = [dev(f"d{i:02}", kind="pci") for i in range(40)]
LIMITS = {
    # an allocation holds at most 32 devices (AllocationResultsMaxSize), counted over all requests
    "all-over-33": Case(MANY[:33], mode="All", refused="number of requested devices 33 exceeds the claim limit of 32"),
    "all-over-32": Case(MANY[:32], mode="All", want={d.name for d in MANY[:32]}),
    "exact-counts-sum-to-33": Case(MANY, count=20, more=(("r1", "ExactCount", 13, ()),),
                                   refused="number of requested devices 33 exceeds the claim limit of 32"),
    "exact-and-all-sum-to-34": Case(MANY[:30], count=4, more=(("r1", "All", 0, ()),),
                                    refused="number of requested devices 34 exceeds the claim limit of 32"),
    "exact-counts-sum-to-32": Case(MANY, count=20, more=(("r1", "ExactCount", 12, ()),),
                                   want={d.name for d in MANY[:32]}),
}


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_at_most_32_devices_per_claim(name: str) -> None:
    check(LIMITS[name])


TYPE_OF = {
    "numa-is-int": Case([dev("a", numaNode=1), dev("b")], count=1,
                        selectors=(f"has({HW}.numaNode) && type({HW}.numaNode) == int",), want={"a"}),
    "not-int-skips-int": Case([dev("a", numaNode=1), dev("b", numaNode="x")], count=1,
                              selectors=(f"!(type({HW}.numaNode) == int)",), want={"b"}),
    "each-type": Case([dev("a", kind="pci", vf=True, fw=Version("1.2.3"))], count=1, selectors=(
        f"type({HW}.kind) == string && type({HW}.vf) == bool && type({HW}.kind) != int",
        "type(1u) == uint && type(1.0) == double && type(b'x') == bytes && type([]) == list",
        "type({}) == map && type(null) == null_type && type(int) == type && type(type(1)) == type",
        f"type(device.attributes) == map && type({HW}.fw) == type(semver('1.0.0'))",
        f"type({HW}.fw) != type('1.0.0') && type(quantity('1')) != int && type(1) == type(2)",
    ), want={"a"}),
}


@pytest.mark.parametrize("name", sorted(TYPE_OF))
def test_type_values_compare(name: str) -> None:
    check(TYPE_OF[name])


TERNARY = {
    # cel-go's _?_:_ needs both branches of one type: int against bool does not compile
    "int-or-bool": Case([dev("a", kind="pci")], selectors=(f"has({HW}.kind) ? {HW}.kind.size() : 0 > 3",),
                        refused="no matching overload for '_\\?_:_' applied to '\\(bool, int, bool\\)'"),
    "string-or-int": Case([dev("a", kind="pci")], selectors=("(true ? 'x' : 1) == 'x'",), refused="does not compile"),
    # same types, or a dynamic branch, compile
    "int-or-int": Case([dev("a", kind="pci")], selectors=(f"(has({HW}.kind) ? {HW}.kind.size() : 0) > 2",),
                       want={"a"}),
    "dyn-or-int": Case([dev("a", numaNode=1)], selectors=(f"(has({HW}.numaNode) ? {HW}.numaNode : 0) == 1",),
                       want={"a"}),
}


@pytest.mark.parametrize("name", sorted(TERNARY))
def test_ternary_branches_share_a_type(name: str) -> None:
    check(TERNARY[name])


SIZE_GE1 = (f'{CAP}.size.compareTo(quantity("1")) >= 0',)
PREFERENCE = {
    # upstream (no preference) takes a before it meets b's error; the preferred node's b fails, c fits
    "preferred-device-fails": Case([dev("a", {"size": 5}, numaNode=0), dev("b", numaNode=1),
                                    dev("c", {"size": 5}, numaNode=1)], class_selectors=SIZE_GE1,
                                   extra={"numa": frozenset({1})}, want={"c"}),
    # upstream meets b's error first: refused, though the preferred node's a would fit
    "upstream-order-fails": Case([dev("b", numaNode=1), dev("a", {"size": 5}, numaNode=0)], class_selectors=SIZE_GE1,
                                 extra={"numa": frozenset({0})}, refused="failed on device b"),
    # no error anywhere: the preference decides
    "preferred-without-errors": Case([dev("a", {"size": 5}, numaNode=0), dev("c", {"size": 5}, numaNode=1)],
                                     class_selectors=SIZE_GE1, extra={"numa": frozenset({1})}, want={"c"}),
}


@pytest.mark.parametrize("name", sorted(PREFERENCE))
def test_numa_preference_keeps_upstream_errors(name: str) -> None:
    check(PREFERENCE[name])


def test_numa_preference_keeps_upstream_constraint_error() -> None:
    """An All request under a constraint with the request before it: upstream (no preference) takes
    x for r0 first and stops with an error on g; preferring node 0 must not find y + g instead."""
    case = Case([dev("x", numaNode=2), dev("y", numaNode=0), dev("g", numaNode=0, grp=1)], count=1,
                more=(("r1", "All", 0, (f"has({HW}.grp)",)),), match=("hwagent.io/numaNode",),
                extra={"numa": frozenset({0})}, refused="device g .*claim constraint would not be satisfied")
    check(case)
    # the same claim without the device that breaks it: the preferred answer
    check(Case(case.devices[1:], count=1, more=case.more, match=case.match, extra=case.extra, want={"y", "g"}))


LIST60 = "[" + ", ".join(str(i) for i in range(60)) + "]"


def test_cost_limit_refuses_nested_comprehensions_at_once() -> None:
    """60^3 body evaluations: Kubernetes stops it at its cost limit in under a second; cel-python
    took 17 s of CPU per device to reach the same limit."""
    start = time.process_time()
    check(Case([dev("a", numaNode=0), dev("b", numaNode=1)], mode="All",
               selectors=(f"{LIST60}.all(a, {LIST60}.all(b, {LIST60}.all(c, a + b + c >= 0)))",),
               refused="cost limit exceeded"))
    assert time.process_time() - start < 1.0
    # two levels (3,600 evaluations) stay under the limit and are evaluated
    check(Case([dev("a", numaNode=0)], selectors=(f"{LIST60}.all(a, {LIST60}.all(b, a + b >= 0))",), want={"a"}))
