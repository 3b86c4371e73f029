"""Topology manager benchmark: the merge of provider hints on 8 NUMA nodes.

The kubelet walks the full cross product of the providers' hints; with the CPU
manager and the device manager each offering a hint for every NUMA set that can
hold the request (up to 255 sets on 8 nodes, the narrowest ones preferred) that
is about 60,000 permutations for two resources and 13 million for three. hwagent computes the
same decision from the distinct merged hints (tests/unit/topologymanager checks
the equality). The peer, measured side by side in this run, is a literal
Python port of the kubelet's loop (tests/unit/topologymanager/kubelet_reference.py).

Scenarios (policy restricted, no aligned placement exists for the worst case,
so nothing short-circuits):
- 2 resources x ~250 hints: cpu needs 2 nodes (247 sets), a device 1 node of 4-7 (240);
- 3 resources x ~250 hints: the same plus memory needing 3 nodes (219 sets;
  hwagent only, the peer would walk 13 million permutations);
- typical: cpu 1 node, device 1 node, 8 hints each.

Run: .venv/bin/python bench/topologymanager.py [--quick]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import resource
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.topologymanager import TopologyManager, TopologyManagerConfig  # noqa: E402
from agent.contracts.hints import TopologyHint  # noqa: E402
from tests.unit.topologymanager.kubelet_reference import Reference  # noqa: E402

NODES = list(range(8))


def _cpu_seconds() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def median_cpu_ms(fn: Callable[[], object], n: int) -> float:
    """Median CPU ms (CPU time, not wall: the machine is shared)."""
    fn()
    samples = []
    for _ in range(n):
        c = _cpu_seconds()
        fn()
        samples.append(_cpu_seconds() - c)
    return statistics.median(samples) * 1000


def hints(need: int, allowed: list[int] | None = None, limit: int | None = None) -> list[TopologyHint]:
    """What a provider says for a request that fits on ``need`` nodes: every NUMA
    set that could hold it, the narrowest preferred (the CPU manager's way)."""
    pool = allowed if allowed is not None else NODES
    out = []
    for k in range(1, len(NODES) + 1):
        for combo in itertools.combinations(NODES, k):
            if len([n for n in combo if n in pool]) >= need:
                out.append(TopologyHint(frozenset(combo), k == need))
    return out[:limit] if limit else out


def to_ref(providers):
    return [{r: [(sum(1 << n for n in h.affinity), h.preferred) for h in hs] for r, hs in p.items()} for p in providers]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args()
    reps = 3 if args.quick else 7

    tm = TopologyManager(TopologyManagerConfig(policy="restricted"), NODES)
    ref = Reference(NODES)
    cpu2 = {"cpu": hints(2)}
    dev = {"example.com/gpu": hints(1, allowed=[4, 5, 6, 7])}
    mem3 = {"memory": hints(3)}
    typical = [{"cpu": [TopologyHint(frozenset({n}), True) for n in NODES]},
               {"example.com/gpu": [TopologyHint(frozenset({n}), True) for n in NODES]}]

    print(f"topology manager merge, 8 NUMA nodes: median CPU ms of {reps} runs")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")
    rows = []
    for name, providers, with_peer in [
        ("typical: 2 resources x 8 hints", typical, True),
        ("2 resources x ~250 hints", [cpu2, dev], True),
        ("3 resources x ~250 hints", [cpu2, dev, mem3], False),
    ]:
        d = tm.merge(providers)
        ours = median_cpu_ms(functools.partial(tm.merge, providers), reps)
        peer = None
        if with_peer:
            (mask, pref), admit = ref.merge("restricted", to_ref(providers))
            got = (sum(1 << n for n in d.hint.affinity), d.hint.preferred, d.admit)
            assert got == (mask, pref, admit), (got, mask, pref, admit)
            peer = median_cpu_ms(functools.partial(ref.merge, "restricted", to_ref(providers)), max(1, reps // 2))
        rows.append((name, ours, peer, d))
    for name, ours, peer, d in rows:
        ratio = f"{peer / ours:8.1f}x faster" if peer else "   (peer not run)"
        peer_s = f"{peer:10.2f}" if peer else "         -"
        print(f"  {name:34s} hwagent {ours:8.2f} ms   kubelet loop {peer_s} ms  {ratio}   -> {d.hint} admit={d.admit}")


if __name__ == "__main__":
    main()
