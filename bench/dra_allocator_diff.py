"""hwagent's standalone DRA allocator against Kubernetes' own (issue 33): random cases, both verdicts,
and a classifier of every disagreement.

The peer is ``tests/peer/dra/allocpeer`` (Go, our code): ``structured.NewAllocator(...).Allocate``
of the v1.32 tree kubeedge vendors, built offline by ``tests/peer/dra/build_allocpeer.sh``. Each
case (resource.k8s.io/v1 documents: ResourceSlices, DeviceClasses, one ResourceClaim, devices held by
other claims) goes to hwagent's ``agent.dra.allocator.allocate`` and to the peer, which allocates it
``RUNS`` times (it walks pools in Go map order, so the first solution it finds may differ from run to
run). Where hwagent allocates, the peer also judges that answer: every other device marked in use and
each ExactCount request pinned to hwagent's devices (``op: judge``), so the real allocator says
whether it accepts exactly that allocation.

Kinds (``classify``): ``agree:*`` (same verdict, or both allocate valid answers), ``INVALID:*``
(hwagent hands out an allocation the real allocator rejects), ``REFUSES:*`` (hwagent refuses a claim
the peer satisfies), ``known:*`` (the version differences issue 33 lists, where hwagent follows the
current release: All over zero devices, an ExactCount request taking what a later All needs,
searches 1.32 never finishes) and ``peer-gives-up:*`` (hwagent's answer is valid, the peer's search
stops short for another reason).

Run: .venv/bin/python bench/dra_allocator_diff.py --cases 5000 [--seed 1] [--peer PATH]
[--out DIR] (the disagreeing cases as JSON lines, replayable with --replay FILE).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.dra import catalog  # noqa: E402
from agent.dra.allocator import AllocationRefused, allocate  # noqa: E402
from agent.dra.catalog import DraDevice  # noqa: E402
from agent.dra.claims import ClaimError, parse_claim, parse_device_class  # noqa: E402

DRIVER = "hwagent.io"
NODE = "node-1"
API = "resource.k8s.io/v1"
DEFAULT_PEER = Path(os.environ.get("HWAGENT_DRA_ALLOCPEER", "/tmp/hwagent-dra-allocpeer/allocpeer"))
#: peer runs per case (pool order is Go map order)
RUNS = 4
#: per peer run: the 1.32 search has no bound
PEER_TIMEOUT_MS = 1500

H = f'device.attributes["{DRIVER}"]'
C = f'device.capacity["{DRIVER}"]'
STD = 'device.attributes["resource.kubernetes.io"]'
EX = 'device.attributes["example.com"]'

# ---------------------------------------------------------------- generator


def _attr(kind: str, v: Any) -> dict[str, Any]:
    return {kind: v}


def _random_device(rnd: random.Random, name: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {"kind": _attr("string", rnd.choice(["nvme", "loop", "nic", "gpu-a100"]))}
    if rnd.random() < 0.75:
        attrs["numaNode"] = _attr("int", rnd.choice([0, 0, 1, 1, 2]))
    if rnd.random() < 0.6:
        attrs["iommuGroup"] = _attr("int", rnd.choice([0, 1, 2, 3, 4, 5, 2**40, -1]))
    if rnd.random() < 0.7:
        attrs["tier"] = rnd.choice([_attr("int", 1), _attr("int", 0), _attr("bool", True), _attr("bool", False),
                                    _attr("string", "1"), _attr("string", "1.0.0"), _attr("version", "1.0.0"),
                                    _attr("version", "2.0.0")])
    if rnd.random() < 0.8:
        attrs["firmware"] = _attr("version", rnd.choice(["1.0.0", "1.2.3", "2.0.0", "2.1.0-rc.1", "10.0.0",
                                                         "1.0.0+build.1", "1.0.0+build.2", "2.0.0-alpha"]))
    if rnd.random() < 0.6:
        attrs["sriovVF"] = _attr("bool", rnd.random() < 0.5)
    if rnd.random() < 0.6:
        attrs["resource.kubernetes.io/pcieRoot"] = _attr("string", rnd.choice(["pci0000:00", "pci0000:80"]))
    if rnd.random() < 0.4:
        attrs["example.com/fast"] = _attr("bool", rnd.random() < 0.5)
    if rnd.random() < 0.2:
        # the driver's own attributes may also be published fully qualified ("hwagent.io/numaNode")
        attrs = {(f"{DRIVER}/{k}" if "/" not in k and rnd.random() < 0.5 else k): v for k, v in attrs.items()}
    dev: dict[str, Any] = {"name": name, "attributes": attrs}
    if rnd.random() < 0.7:
        size = rnd.choice([1000, 512 * 2**20, 2**30, 5_000_000_000, 2**40, 2 * 2**40])
        dev["capacity"] = {"size": {"value": str(size)}}
    return dev


def _cel(rnd: random.Random) -> str:
    """One selector over every attribute type and capacities, in the forms DRA users write (and some
    that upstream refuses or that fail on some devices)."""
    n, q, v = rnd.choice([0, 1]), rnd.choice(["1Ti", "500Mi", "1Gi", "5G", "1k"]), rnd.choice(["1.0.0", "2.0.0"])
    safe = [
        f"has({H}.numaNode) && {H}.numaNode == {n}",
        f"has({H}.numaNode) && {H}.numaNode >= {n}",
        f'{H}.kind == "{rnd.choice(["nvme", "loop", "nic"])}"',
        f'{H}.kind.startsWith("{rnd.choice(["n", "l", "gpu"])}")',
        f'{H}.kind.matches("^(nvme|nic)$")',
        f'{H}.kind.indexOf("-") >= 0',
        f'{H}.kind.upperAscii() == "NVME"',
        f'{H}.kind.split("-").size() > 1',
        f'{H}.kind.substring(0, 2) == "nv"',
        f'{H}.kind.replace("a100", "h100").endsWith("h100")',
        f'device.driver == "{DRIVER}"',
        f'has({H}.firmware) && {H}.firmware.isGreaterThan(semver("{v}"))',
        f'has({H}.firmware) && {H}.firmware.compareTo(semver("{v}")) >= 0',
        f"has({H}.firmware) && {H}.firmware.major() >= {rnd.choice([1, 2])}",
        f'has({H}.firmware) && {H}.firmware == semver("{v}")',
        f'has({H}.firmware) && {H}.firmware.isLessThan(semver("2.0.0"))',
        f"has({C}.size) && {C}.size.compareTo(quantity(\"{q}\")) >= 0",
        f"has({C}.size) && {C}.size.isGreaterThan(quantity(\"{q}\"))",
        f"has({C}.size) && {C}.size.isLessThan(quantity(\"{q}\"))",
        f"has({C}.size) && {C}.size.asInteger() > {rnd.choice([1000, 2**30])}",
        f"has({C}.size) && {C}.size.asApproximateFloat() < 1e12",
        f"has({H}.sriovVF) && {H}.sriovVF",
        f"has({H}.sriovVF) && !{H}.sriovVF",
        f"has({EX}.fast) && {EX}.fast",
        f'has({STD}.pcieRoot) && {STD}.pcieRoot == "pci0000:00"',
        f"cel.bind(hw, {H}, has(hw.numaNode) && hw.numaNode == {n} && hw.kind != \"loop\")",
        f'"numaNode" in {H}',
        f"{H}.exists(k, k.startsWith(\"iommu\"))",
        f'{H}.exists(k, v, k == "numaNode" && v == {n})',  # two-variable comprehension (1.32)
        f"{H}.?numaNode.orValue(-1) == {n}",
        f"has({H}.iommuGroup) && {H}.iommuGroup in [0, 1, 2]",
        f"has({H}.numaNode) && sets.contains([0, 1], [{H}.numaNode])",
        f"has({H}.numaNode) && [0, 2].indexOf({H}.numaNode) >= 0",
        f"has({H}.iommuGroup) && [{H}.iommuGroup, 3].min() < 3",
        f'{H}.kind.lowerAscii().trim() == "nvme"',
        f'{H}.kind.charAt(0) == "n"',
        f'{H}.kind.lastIndexOf("a") > 0',
        f'[{H}.kind, "x"].join("-").startsWith("nvme")',
        f'{H}.kind.find("[0-9]+") == "100"',
        f'"%s".format([{H}.kind]) == "nvme"',
        'isQuantity("1Gi") && quantity("1Gi").isInteger() && isSemver("1.2.3")',
        f'has({H}.firmware) && {H}.firmware.minor() + {H}.firmware.patch() >= 2',
        f'has({C}.size) && {C}.size.add(quantity("1Gi")).compareTo(quantity("2Gi")) > 0',
        f'has({C}.size) && {C}.size.sub(1000).sign() > 0',
        'isIP("10.0.0.1") && ip("10.0.0.1").family() == 4',
        'true',
    ]
    # equality and order across CEL types (upstream: false, an error, or int/double comparison)
    typed = [
        f"has({H}.tier) && {H}.tier == 1",
        f"has({H}.tier) && {H}.tier == true",
        f'has({H}.tier) && {H}.tier == "1.0.0"',
        f"has({H}.numaNode) ? {H}.numaNode < 0.5 : false",
        f'has({H}.numaNode) && !({H}.numaNode == "1")',
        f"has({H}.sriovVF) && {H}.sriovVF == 1",
    ]
    risky = [
        f"{H}.numaNode >= 0",  # fails on a device without numaNode
        f"{H}.numaNode == {n}",
        f'{H}.firmware.isGreaterThan(semver("{v}"))',
        f'has({H}.firmware) && {H}.firmware == "{v}"',  # version vs string: runtime error upstream
        f"has({C}.size) && {C}.size > 5000000000",  # compile error upstream (Quantity vs int)
        f"{C}.size.compareTo(quantity(\"{q}\")) >= 0",
        'device.attributes["other.example"].x == 1',
        f"{H}.numaNode",  # not a bool where numaNode is an int
        f'has({H}.kind) && {H}.kind.size() > 3 && {H}.kind == 1',
        f'{H}.firmware.major() == {rnd.choice([1, 2])}',
        'semver("v1.2", true) == semver("1.2.0")',  # normalizing semver(): newer than 1.32
        f'{H}.kind.reverse() == "emvn"',  # strings ext v3: newer than 1.32
        f'{C}.size.asInteger() > 0',
    ]
    # the rest of the language: conversions, arithmetic errors, macros, durations, bytes, types, regex literals
    core = [
        f"has({H}.iommuGroup) && {H}.iommuGroup * 9223372036854775807 > 0",  # overflow when not 0/1
        f"has({H}.numaNode) && 1 / ({H}.numaNode - {H}.numaNode) > 0",  # division by zero
        f"int({H}.kind) > 0",  # not a number
        f"has({H}.numaNode) && double({H}.numaNode) / 2.0 < 0.6",
        f'has({H}.numaNode) && string({H}.numaNode) == "0"',
        f'{H}["kind"] == "nvme"',
        f'"size" in device.capacity["{DRIVER}"]',
        f"size({H}) > 3",
        f"{H}.size() > 3",
        f'{H}.filter(k, k.startsWith("n")).size() >= 1',
        f'{H}.map(k, k.size()).exists(n, n > 8)',
        'duration("1h") > duration("30m")',
        'timestamp("2024-01-01T00:00:00Z") < timestamp("2025-01-01T00:00:00Z")',
        'b"abc".size() == 3',
        'uint(1) == 1u',
        f"has({H}.numaNode) && dyn({H}.numaNode) == 0",
        f"has({H}.numaNode) && type({H}.numaNode) == int",
        f"has({H}.firmware) && type({H}.firmware) == string",
        f'{H}.kind.matches("[")',  # a regex that does not compile
        f'has({H}.firmware) && !{H}.firmware.isLessThan({H}.firmware)',
        f'{H}.kind == "nv\\u006de"',
        f'has({H}.kind) ? {H}.kind.size() : 0 > 3',
    ]
    x = rnd.random()
    expr = (rnd.choice(risky) if x < 0.07 else rnd.choice(typed) if x < 0.15 else rnd.choice(core) if x < 0.23
            else rnd.choice(safe))
    if rnd.random() < 0.15:
        other = rnd.choice(safe)
        expr = f"({expr}) {rnd.choice(['&&', '||'])} ({other})"
    elif rnd.random() < 0.05:
        expr = f"!({expr})"
    return expr


MATCH_ATTRS = [f"{DRIVER}/numaNode", f"{DRIVER}/iommuGroup", f"{DRIVER}/tier", f"{DRIVER}/firmware",
               f"{DRIVER}/sriovVF", f"{DRIVER}/kind", "resource.kubernetes.io/pcieRoot", "example.com/fast"]


def _search_case(rnd: random.Random, index: int) -> dict[str, Any]:
    """A claim only a deep search answers: 16-28 devices of distinct iommuGroups but for the last
    few, a request for count of them sharing one (issue 33's step-bound example when the count fits,
    an infeasible one when it does not), sometimes behind another request that takes any devices
    (1.32 then walks every choice of that request before it can say no)."""
    n, share = rnd.randint(16, 28), rnd.randint(2, 5)
    devs = []
    for i in range(n):
        group = 99 if i >= n - share else i
        devs.append({"name": f"d{i}", "attributes": {"iommuGroup": _attr("int", group), "kind": _attr("string", "nic")}})
    pool = f"{NODE}/nic"
    slices = [{"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": f"{NODE}-0"},
               "spec": {"driver": DRIVER, "nodeName": NODE,
                        "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1}, "devices": devs}}]
    classes = [{"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": "any"}, "spec": {}}]
    count = rnd.choice([share, share, share + 1])
    reqs: list[dict[str, Any]] = [{"name": "r0", "exactly": {"deviceClassName": "any", "count": count}}]
    cons: list[dict[str, Any]] = [{"matchAttribute": f"{DRIVER}/iommuGroup"}]
    if rnd.random() < 0.4:
        reqs.insert(0, {"name": "first", "exactly": {"deviceClassName": "any", "count": rnd.randint(1, 4)}})
        cons[0]["requests"] = ["r0"]
    claim = {"apiVersion": API, "kind": "ResourceClaim",
             "metadata": {"name": f"claim-{index}", "namespace": "default", "uid": f"uid-{index}"},
             "spec": {"devices": {"requests": reqs, "constraints": cons}}}
    return {"id": f"case-{index}", "node": NODE, "slices": slices, "classes": classes, "claim": claim, "held": []}


def _big_case(rnd: random.Random, index: int) -> dict[str, Any]:
    """Near the API's limit of 32 devices per claim: an All request over 28-40 devices, or two
    ExactCount requests whose counts add up past 32."""
    n = rnd.randint(28, 40)
    devs = [{"name": f"d{i}", "attributes": {"numaNode": _attr("int", i % 2)}} for i in range(n)]
    slices = [{"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": f"{NODE}-0"},
               "spec": {"driver": DRIVER, "nodeName": NODE,
                        "pool": {"name": f"{NODE}/nic", "generation": 1, "resourceSliceCount": 1}, "devices": devs}}]
    classes = [{"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": "any"}, "spec": {}}]
    if rnd.random() < 0.5:
        reqs = [{"name": "r0", "exactly": {"deviceClassName": "any", "allocationMode": "All"}}]
    else:
        reqs = [{"name": f"r{i}", "exactly": {"deviceClassName": "any", "count": rnd.randint(10, 20)}} for i in range(2)]
    claim = {"apiVersion": API, "kind": "ResourceClaim",
             "metadata": {"name": f"claim-{index}", "namespace": "default", "uid": f"uid-{index}"},
             "spec": {"devices": {"requests": reqs}}}
    held = [{"driver": DRIVER, "pool": f"{NODE}/nic", "device": d["name"]} for d in devs if rnd.random() < 0.05]
    return {"id": f"case-{index}", "node": NODE, "slices": slices, "classes": classes, "claim": claim, "held": held}


def generate(rnd: random.Random, index: int) -> dict[str, Any]:
    """One random case: 1-3 pools of 1-10 devices (some up to 24), 1-3 classes, a claim of 1-3
    requests, held devices; 3% are deep-search cases (``_search_case``), 1% near the 32-device
    limit (``_big_case``)."""
    x = rnd.random()
    if x < 0.03:
        return _search_case(rnd, index)
    if x < 0.04:
        return _big_case(rnd, index)
    slices, names = [], []
    shape = rnd.random()
    for p in range(rnd.choice([1, 1, 2, 2, 3])):
        pool = f"{NODE}/{['nvme', 'loop', 'nic'][p]}"
        # device names repeat across pools: a device is (driver, pool, name)
        n = rnd.randint(0, 24) if shape < 0.05 else rnd.randint(1, 10)
        devs = [_random_device(rnd, f"d{i}") for i in range(n)]
        names += [(pool, d["name"]) for d in devs]
        slices.append({"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": f"{NODE}-{p}"},
                       "spec": {"driver": DRIVER, "nodeName": NODE,
                                "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1}, "devices": devs}})
    classes = [{"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": "any"}, "spec": {}}]
    for i in range(rnd.randint(0, 2)):
        sels = [{"cel": {"expression": _cel(rnd)}} for _ in range(rnd.randint(1, 2))]
        classes.append({"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": f"class-{i}"},
                        "spec": {"selectors": sels}})
    reqs = []
    for i in range(rnd.choice([1, 1, 2, 2, 3])):
        ex: dict[str, Any] = {"deviceClassName": rnd.choice(classes)["metadata"]["name"]}
        if rnd.random() < 0.2:
            ex["allocationMode"] = "All"
        elif rnd.random() < 0.7:
            ex["count"] = rnd.choice([1, 1, 1, 2, 2, 3, 4])
        if rnd.random() < 0.35:
            ex["selectors"] = [{"cel": {"expression": _cel(rnd)}} for _ in range(rnd.randint(1, 2))]
        reqs.append({"name": f"r{i}", "exactly": ex})
    cons = []
    for _ in range(rnd.choice([0, 0, 0, 1, 1, 2])):
        c: dict[str, Any] = {"matchAttribute": rnd.choice(MATCH_ATTRS)}
        if len(reqs) > 1 and rnd.random() < 0.4:
            c["requests"] = sorted(rnd.sample([r["name"] for r in reqs], rnd.randint(1, len(reqs))))
        cons.append(c)
    devices: dict[str, Any] = {"requests": reqs}
    if cons:
        devices["constraints"] = cons
    claim = {"apiVersion": API, "kind": "ResourceClaim",
             "metadata": {"name": f"claim-{index}", "namespace": "default", "uid": f"uid-{index}"},
             "spec": {"devices": devices}}
    held = [{"driver": DRIVER, "pool": p, "device": d} for p, d in names if rnd.random() < 0.15]
    out = {"id": f"case-{index}", "node": NODE, "slices": slices, "classes": classes, "claim": claim,
           "held": held}
    if rnd.random() < 0.3:
        # the topology manager's affinity: hwagent tries these NUMA nodes' devices first (the peer
        # has no such input; any answer must still be one it accepts)
        out["numa"] = rnd.choice([[0], [1], [0, 1]])
    return out


# ---------------------------------------------------------------- hwagent's side


def hw_devices(slices: Iterable[Mapping[str, Any]]) -> list[DraDevice]:
    """The slices' devices as hwagent's allocator sees them (catalog's own flattening of values)."""
    out = []
    for s in slices:
        spec = s["spec"]
        for d in spec.get("devices", []):
            attrs = {catalog.qualified(k, spec["driver"]): catalog._plain(v) for k, v in d.get("attributes", {}).items()}
            cap = {catalog.qualified(k, spec["driver"]): int(v["value"]) for k, v in d.get("capacity", {}).items()}
            numa = attrs.get(f"{DRIVER}/numaNode")
            out.append(DraDevice(spec["driver"], spec["pool"]["name"], d["name"], attrs, cap,
                                 numa if isinstance(numa, int) and not isinstance(numa, bool) else None))
    return out


@dataclass
class HwAnswer:
    verdict: str  # allocated | refused | crashed
    results: list[dict[str, str]] = field(default_factory=list)
    error: str = ""


#: hwagent's allocator gets this long per case (seconds) before the case counts as BUG:hwagent-slow
HW_TIMEOUT = 20.0


class _Slow(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Slow()


def hw_allocate(case: Mapping[str, Any]) -> HwAnswer:
    """hwagent's answer, bounded by HW_TIMEOUT (SIGALRM: call it from the main thread)."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, HW_TIMEOUT)
    try:
        return _hw_allocate(case)
    except _Slow:
        return HwAnswer("crashed", error=f"slow: no answer within {HW_TIMEOUT} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _hw_allocate(case: Mapping[str, Any]) -> HwAnswer:
    try:
        classes = {c.name: c for c in (parse_device_class(d) for d in case["classes"])}
        claim = parse_claim(case["claim"])
        held = {(h["driver"], h["pool"], h["device"]): "uid-other" for h in case["held"]}
        numa = frozenset(case["numa"]) if case.get("numa") is not None else None
        got = allocate(claim, classes, hw_devices(case["slices"]), held, numa)
    except (AllocationRefused, ClaimError) as e:
        return HwAnswer("refused", error=str(e))
    except _Slow:
        raise
    except Exception as e:  # noqa: BLE001 - anything else is a bug worth its own kind
        return HwAnswer("crashed", error=f"{type(e).__name__}: {e}")
    return HwAnswer("allocated", [{"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
                                  for r in got])


# ---------------------------------------------------------------- the peer


class Peer:
    """The Go peer as a child process, restarted after a run it had to abandon (status 3)."""

    def __init__(self, binary: Path) -> None:
        self.binary = binary
        self.proc: subprocess.Popen[str] | None = None
        self.restarts = 0

    def _start(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self.restarts += 1
            self.proc = subprocess.Popen([str(self.binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True, bufsize=1)
        return self.proc

    def ask(self, case: Mapping[str, Any], op: str, runs: int = RUNS, timeout_ms: int = PEER_TIMEOUT_MS,
            **extra: Any) -> dict[str, Any]:
        proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({**case, **extra, "op": op, "runs": runs, "timeout_ms": timeout_ms}) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"allocpeer exited with {proc.wait()} on {case['id']}")
        out = json.loads(line)
        if out.get("note"):
            proc.wait(timeout=10)
        return out

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


# ---------------------------------------------------------------- classifier


def _key(results: Iterable[Mapping[str, str]]) -> frozenset[tuple[str, str, str, str]]:
    return frozenset((r["request"], r["driver"], r["pool"], r["device"]) for r in results)


def _requests(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(case["claim"]["spec"]["devices"]["requests"])


def _all_requests(case: Mapping[str, Any]) -> list[str]:
    return [r["name"] for r in _requests(case) if r["exactly"].get("allocationMode") == "All"]


#: CEL the current release compiles and 1.32 does not (SemverLib version 1, Kubernetes 1.33: the
#: normalizing semver(text, true) and isSemver(text, true)); a compile error naming one is a version
#: difference, not an invalid allocation
NEWER_THAN_132 = re.compile(r"(?:semver|isSemver)\(\s*\"[^\"]*\"\s*,\s*(?:true|false)\s*\)")


def _cel_cause(text: str) -> str:
    """A short name for what upstream's CEL said, so distinct causes are distinct kinds."""
    for pattern, name in ((r"no matching overload for '([^']+)'", "no-overload-{}"),
                          (r"undeclared reference to '([^']+)'", "undeclared-{}"),
                          (r"expected type '([^']+)' but found", "heterogeneous-literal"),
                          (r"error during formatting", "format-of-dyn"), (r"no such key", "no-such-key"), (r"no such overload", "no-such-overload"),
                          (r"could not be converted to bool", "not-bool"),
                          (r"exceeds the claim limit of (\d+)", "more-than-{}-results")):
        m = re.search(pattern, text)
        if m:
            return ":" + name.format(*m.groups())
    return ""


def _expr_form(message: str) -> str:
    """The form of the expression a message quotes (names of attributes kept, literals not), so each
    kind of expression hwagent cannot evaluate is its own kind."""
    m = re.search(r"CEL expression '(.*?)' (?:does not compile|failed on|gave)", message)
    if not m:
        return ""
    e = m.group(1).replace(H, "H").replace(C, "C")
    e = re.sub(r'"[^"]*"', "S", e)
    e = re.sub(r"\b\d+(\.\d+)?(e\d+)?\b", "N", e)
    return ":" + e[:90]


def _cel_error_kind(text: str) -> str:
    if "compile error" in text:
        return "cel-compile"
    if "runtime error" in text:
        return "cel-runtime"
    return ""


@dataclass
class Verdict:
    kind: str
    hw: HwAnswer
    peer: dict[str, Any]
    judge: dict[str, Any] | None = None
    detail: str = ""


#: peer runs before a disagreement over several pools is believed (pool order is random per run)
RUNS_TO_CONFIRM = 24


def classify(case: dict[str, Any], hw: HwAnswer, peer: Peer) -> Verdict:
    """Which kind of (dis)agreement this case is; a disagreement over several pools is asked again
    with more runs first (another pool order may be the upstream answer hwagent gave)."""
    v = _classify(case, hw, peer, RUNS)
    if not v.kind.startswith(("agree:", "known:")) and len(case["slices"]) > 1:
        v = _classify(case, hw, peer, RUNS_TO_CONFIRM)
    return v


def _classify(case: dict[str, Any], hw: HwAnswer, peer: Peer, runs: int) -> Verdict:
    ans = peer.ask(case, "allocate", runs=runs)
    if hw.verdict == "crashed":
        return Verdict("BUG:hwagent-slow" if hw.error.startswith("slow:") else "BUG:hwagent-exception", hw, ans)
    if hw.verdict == "refused":
        return _refused(case, hw, ans)
    judge = peer.ask(case, "judge", runs=1, results=hw.results)
    j = judge["outcomes"][0]
    if j["verdict"] == "allocated" and _key(j.get("results", [])) == _key(hw.results):
        return _valid(case, hw, ans, judge)
    return _invalid(case, hw, ans, judge, peer)


def _refused(case: dict[str, Any], hw: HwAnswer, ans: dict[str, Any]) -> Verdict:
    """hwagent refused: does the peer find an allocation (a witness that the claim is satisfiable)?"""
    outs = ans["outcomes"]
    allocs = [o for o in outs if o["verdict"] == "allocated"]
    if not allocs:
        if any(o["verdict"] == "timeout" for o in outs):
            return Verdict("known:peer-never-finishes", hw, ans)
        peer_err = all(o["verdict"] == "error" for o in outs)
        hw_err = "CEL" in hw.error
        why = "both-cel-error" if peer_err and hw_err else "both-unsatisfiable" if not (peer_err or hw_err) else \
            ("peer-error-hwagent-unsatisfiable" if peer_err else "hwagent-cel-error-peer-unsatisfiable")
        return Verdict(f"agree:refused:{why}", hw, ans)
    zero_all = [r for r in _all_requests(case) if not any(x["request"] == r for x in allocs[0].get("results", []))]
    if zero_all:
        return Verdict("known:all-over-zero-devices", hw, ans, detail=",".join(zero_all))
    errors = [o["error"] for o in outs if o["verdict"] == "error"]
    if "CEL" in hw.error and any(_cel_error_kind(e) == "cel-runtime" for e in errors):
        # upstream's own answer depends on the order it walks pools in (Go map order): in some
        # runs a failing device came before a solution
        return Verdict("agree:refused-as-upstream-does-in-some-pool-orders", hw, ans)
    if case.get("numa") is not None and "CEL" in hw.error:
        plain = hw_allocate({k: v for k, v in case.items() if k != "numa"})
        if plain.verdict == "allocated":
            # the preferred NUMA nodes' devices tried first: the walk reaches a failing device
            return Verdict("REFUSES:numa-preference-reaches-failing-device", hw, ans)
    if "steps" in hw.error:
        return Verdict("REFUSES:step-bound", hw, ans)
    if "CEL" in hw.error:
        return Verdict("REFUSES:cel" + ("-compile" if "compile" in hw.error else "-eval") + _expr_form(hw.error),
                       hw, ans)
    if "free match" in hw.error or "matches (allocationMode All" in hw.error:
        return Verdict("REFUSES:selector-false-in-hwagent", hw, ans)
    return Verdict("REFUSES:other", hw, ans)


def _valid(case: dict[str, Any], hw: HwAnswer, ans: dict[str, Any], judge: dict[str, Any]) -> Verdict:
    """hwagent's allocation is one the real allocator accepts: did the peer find one itself?"""
    outs = ans["outcomes"]
    allocs = [o for o in outs if o["verdict"] == "allocated"]
    if allocs:
        same = any(_key(o.get("results", [])) == _key(hw.results) for o in allocs)
        return Verdict("agree:allocated-same" if same else "agree:allocated-both-valid", hw, ans, judge)
    if any(o["verdict"] == "timeout" for o in outs):
        return Verdict("known:peer-never-finishes", hw, ans, judge)
    errs = [o["error"] for o in outs if o["verdict"] == "error"]
    if any("claim constraint would not be satisfied" in e for e in errs):
        return Verdict("peer-gives-up:all-device-breaks-constraint", hw, ans, judge)
    if any(_cel_error_kind(e) == "cel-runtime" for e in errs):
        return Verdict("peer-gives-up:selector-error-on-other-device", hw, ans, judge)
    names = [r["name"] for r in _requests(case)]
    if any(names.index(a) > 0 for a in _all_requests(case)):
        return Verdict("known:exactcount-takes-what-all-needs", hw, ans, judge)
    return Verdict("peer-gives-up:other", hw, ans, judge)


def _invalid(case: dict[str, Any], hw: HwAnswer, ans: dict[str, Any], judge: dict[str, Any],
             peer: Peer) -> Verdict:
    """The real allocator rejects hwagent's allocation: why (asking it again with looser pins)."""
    j = judge["outcomes"][0]
    if j["verdict"] == "timeout":
        return Verdict("known:peer-never-finishes", hw, ans, judge)
    if j["verdict"] == "error":
        kind = _cel_error_kind(j["error"])
        if kind == "cel-runtime" and _all_requests(case):
            again = peer.ask(case, "judge", runs=1, results=hw.results, pin_all=True)
            if again["outcomes"][0]["verdict"] == "allocated":
                return Verdict("INVALID:all-skips-device-whose-selector-fails", hw, ans, judge)
        if "claim constraint would not be satisfied" in j["error"]:
            return Verdict("INVALID:all-devices-break-constraint", hw, ans, judge)
        if kind == "cel-compile" and NEWER_THAN_132.search(j["error"]):
            return Verdict("known:cel-newer-than-1.32", hw, ans, judge)
        return Verdict(f"INVALID:{kind or 'peer-error'}{_cel_cause(j['error'])}", hw, ans, judge)
    if j["verdict"] == "allocated":
        return Verdict("INVALID:all-set-differs", hw, ans, judge)
    loose = peer.ask(case, "judge", runs=1, results=hw.results, drop_constraints=True)
    if loose["outcomes"][0]["verdict"] == "allocated":
        return Verdict("INVALID:matchAttribute", hw, ans, judge)
    return Verdict("INVALID:selector-false-upstream", hw, ans, judge)


# ---------------------------------------------------------------- reporting


def size(case: Mapping[str, Any]) -> tuple[int, int]:
    """Smaller is a simpler example: devices + requests + constraints + classes, then text length."""
    devs = sum(len(s["spec"]["devices"]) for s in case["slices"])
    d = case["claim"]["spec"]["devices"]
    return devs + len(d["requests"]) + len(d.get("constraints", [])) + len(case["classes"]), len(json.dumps(case))


def _value(v: Mapping[str, Any]) -> str:
    (k, x), = v.items()
    return f"{k}:{json.dumps(x)}"


def describe(case: Mapping[str, Any], v: Verdict) -> str:
    """A case in a few lines, for dra_diff_findings.md."""
    lines = []
    for s in case["slices"]:
        for d in s["spec"]["devices"]:
            attrs = ", ".join(f"{k}={_value(x)}" for k, x in sorted(d["attributes"].items()))
            cap = ", ".join(f"{k}={x['value']}" for k, x in d.get("capacity", {}).items())
            lines.append(f"  device {s['spec']['pool']['name']}/{d['name']}: {attrs}" + (f"; capacity {cap}" if cap else ""))
    if case["held"]:
        lines.append("  held by another claim: " + ", ".join(f"{h['pool']}/{h['device']}" for h in case["held"]))
    for c in case["classes"]:
        sels = [s["cel"]["expression"] for s in c["spec"].get("selectors", [])]
        lines.append(f"  class {c['metadata']['name']}: {sels or 'no selector'}")
    for r in _requests(case):
        lines.append(f"  request {r['name']}: {json.dumps(r['exactly'])}")
    for c in case["claim"]["spec"]["devices"].get("constraints", []):
        lines.append(f"  constraint: {json.dumps(c)}")
    hw = v.hw.error if v.hw.verdict != "allocated" else ", ".join(
        f"{r['request']}={r['pool']}/{r['device']}" for r in v.hw.results)
    lines.append(f"  hwagent: {v.hw.verdict}: {hw[:300]}")
    for o in v.peer["outcomes"]:
        what = o.get("error", "") or ", ".join(f"{r['request']}={r['pool']}/{r['device']}" for r in o.get("results", []))
        lines.append(f"  k8s 1.32 ({o['runs']}/{sum(x['runs'] for x in v.peer['outcomes'])} runs): "
                     f"{o['verdict']}: {what[:300]}")
    if v.judge is not None:
        o = v.judge["outcomes"][0]
        lines.append(f"  k8s 1.32 judging hwagent's answer: {o['verdict']} {o.get('error', '')[:300]}")
    return "\n".join(lines)


@dataclass
class Run:
    counts: Counter[str] = field(default_factory=Counter)
    smallest: dict[str, tuple[tuple[int, int], dict[str, Any], Verdict]] = field(default_factory=dict)
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    claims: int = 0
    #: hwagent's three slowest answers (seconds, case id)
    slowest: list[tuple[float, str]] = field(default_factory=list)


def run_cases(cases: Iterable[dict[str, Any]], peer: Peer) -> Run:
    out = Run()
    for case in cases:
        out.claims += 1
        t = time.monotonic()
        hw = hw_allocate(case)
        out.slowest = sorted(out.slowest + [(time.monotonic() - t, case["id"])], reverse=True)[:3]
        v = classify(case, hw, peer)
        out.counts[v.kind] += 1
        if not v.kind.startswith("agree:"):
            out.disagreements.append({"kind": v.kind, "case": case, "hwagent": hw.__dict__,
                                      "peer": v.peer, "judge": v.judge})
            sz = size(case)
            if v.kind not in out.smallest or sz < out.smallest[v.kind][0]:
                out.smallest[v.kind] = (sz, case, v)
    return out


def _smaller(case: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """Every case one step simpler than ``case`` (a device, attribute, capacity, held entry, class,
    selector, constraint or request less), for shrinking an example."""
    import copy

    def variant(edit: Any) -> dict[str, Any] | None:
        c = copy.deepcopy(case)
        return c if edit(c) is not False else None

    for e in _device_edits(case) + _claim_edits(case):
        v = variant(e)
        if v is not None:
            yield v


def _device_edits(case: dict[str, Any]) -> list[Any]:
    edits: list[Any] = []
    for si, s in enumerate(case["slices"]):
        for di, dev in enumerate(s["spec"]["devices"]):
            edits.append(lambda c, si=si, di=di: c["slices"][si]["spec"]["devices"].pop(di))
            for a in dev.get("attributes", {}):
                edits.append(lambda c, si=si, di=di, a=a: c["slices"][si]["spec"]["devices"][di]["attributes"].pop(a))
            if "capacity" in dev:
                edits.append(lambda c, si=si, di=di: c["slices"][si]["spec"]["devices"][di].pop("capacity"))
    for hi in range(len(case["held"])):
        edits.append(lambda c, hi=hi: c["held"].pop(hi))
    return edits


def _claim_edits(case: dict[str, Any]) -> list[Any]:
    d = case["claim"]["spec"]["devices"]
    edits: list[Any] = []
    used = {r["exactly"]["deviceClassName"] for r in d["requests"]}
    for ci, cls in enumerate(case["classes"]):
        if cls["metadata"]["name"] not in used:
            edits.append(lambda c, ci=ci: c["classes"].pop(ci))
        for xi in range(len(cls["spec"].get("selectors", []))):
            edits.append(lambda c, ci=ci, xi=xi: c["classes"][ci]["spec"]["selectors"].pop(xi))
    for ki in range(len(d.get("constraints", []))):
        edits.append(lambda c, ki=ki: c["claim"]["spec"]["devices"]["constraints"].pop(ki))
    for ri, r in enumerate(d["requests"]):
        for xi in range(len(r["exactly"].get("selectors", []))):
            edits.append(lambda c, ri=ri, xi=xi: c["claim"]["spec"]["devices"]["requests"][ri]["exactly"]["selectors"].pop(xi))
        if (r["exactly"].get("count") or 1) > 1:
            edits.append(lambda c, ri=ri: c["claim"]["spec"]["devices"]["requests"][ri]["exactly"].update(
                count=c["claim"]["spec"]["devices"]["requests"][ri]["exactly"]["count"] - 1))

        def drop_request(c: dict[str, Any], ri: int = ri, name: str = r["name"]) -> bool:
            dd = c["claim"]["spec"]["devices"]
            if len(dd["requests"]) == 1:
                return False
            dd["requests"].pop(ri)
            for k in dd.get("constraints", []):
                if "requests" in k:
                    k["requests"] = [x for x in k["requests"] if x != name]
                    if not k["requests"]:
                        del k["requests"]
            return True
        edits.append(drop_request)
    return edits


def shrink(case: dict[str, Any], kind: str, peer: Peer, budget: int = 400) -> tuple[dict[str, Any], Verdict]:
    """A smallest case (greedily) that still classifies as ``kind``."""
    best = case
    verdict = classify(case, hw_allocate(case), peer)
    tries, progress = 0, True
    while progress and tries < budget:
        progress = False
        for cand in _smaller(best):
            tries += 1
            v = classify(cand, hw_allocate(cand), peer)
            if v.kind == kind:
                best, verdict, progress = cand, v, True
                break
            if tries >= budget:
                break
    return best, verdict


def seeded_cases(seed: int, n: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    return [generate(rnd, i) for i in range(n)]


def findings(run: Run, header: str, peer: Peer | None = None) -> str:
    """Per kind, its count and its smallest example (shrunk further when ``peer`` is given)."""
    parts = [header, ""]
    for kind in sorted(run.smallest):
        _, case, v = run.smallest[kind]
        if peer is not None and not kind.startswith("known:peer-never"):
            case, v = shrink(case, kind, peer)
        parts += [f"### {kind} ({run.counts[kind]} cases)", "", "```", describe(case, v), "```", ""]
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--peer", type=Path, default=DEFAULT_PEER)
    ap.add_argument("--out", type=Path, help="write disagreements.jsonl and findings.md here")
    ap.add_argument("--replay", type=Path, help="a disagreements.jsonl to run again instead of random cases")
    args = ap.parse_args(argv)
    if not os.access(args.peer, os.X_OK):
        print(f"no allocpeer at {args.peer}: build it with tests/peer/dra/build_allocpeer.sh", file=sys.stderr)
        return 2
    if args.replay:
        cases = [json.loads(line)["case"] for line in args.replay.read_text().splitlines() if line.strip()]
    else:
        g0 = time.process_time()
        cases = seeded_cases(args.seed, args.cases)
        print(f"floor: generating the cases took {time.process_time() - g0:.2f} s CPU")
    peer = Peer(args.peer)
    t0, r0 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    try:
        run = run_cases(cases, peer)
    finally:
        peer.close()
    wall = time.monotonic() - t0
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_hw = me.ru_utime - r0.ru_utime + me.ru_stime - r0.ru_stime
    cpu_peer = kids.ru_utime + kids.ru_stime
    print(f"cases {len(cases)}  claims {run.claims}  seed {args.seed}  peer restarts {peer.restarts}")
    for kind, n in sorted(run.counts.items()):
        print(f"  {kind:50s} {n:6d}")
    agree = sum(n for k, n in run.counts.items() if k.startswith("agree:"))
    invalid = sum(n for k, n in run.counts.items() if k.startswith("INVALID:"))
    print(f"agreements {agree}/{run.claims}  invalid allocations {invalid}")
    print("hwagent's slowest answers: " + ", ".join(f"{cid} {sec * 1000:.0f} ms" for sec, cid in run.slowest))
    print(f"wall {wall:.1f} s  CPU hwagent+harness {cpu_hw:.1f} s  CPU allocpeer {cpu_peer:.1f} s  "
          f"loadavg {open('/proc/loadavg').read().strip()}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        with open(args.out / "disagreements.jsonl", "w") as f:
            for d in run.disagreements:
                f.write(json.dumps(d, default=str) + "\n")
        peer = Peer(args.peer)
        try:
            (args.out / "findings.md").write_text(findings(run, f"seed {args.seed}, {len(cases)} cases", peer))
        finally:
            peer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
