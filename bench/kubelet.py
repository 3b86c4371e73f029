"""Kubelet-mode benchmark: one pod-directory refresh and one scrape of the pod-labelled series.

Node: 500 pods (besteffort/burstable/guaranteed mixed) × 2 containers + sandbox
= 1,500 container cgroups in a kubepods-like directory tree, the kubelet's log
layout for them, and a pod-resources List answer for all 500 pods.

- refresh: walk_kubepods + read_log_names + build_directory (what the component
  does every refresh_s, minus the gRPC call), against the floor: one bare
  os.scandir walk of the same tree and log dirs (the directory reads any
  reverse lookup must do).
- scrape: container_series over 1,500 cgroups' histograms with the cap at 100,
  against the floor: summing the same 1,500 histograms into one (no lookups).

Run: .venv/bin/python bench/kubelet.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.cgroups.kubepods import walk_kubepods  # noqa: E402
from agent.kubelet.logs import read_log_names  # noqa: E402
from agent.contracts.poddirectory import ContainerResources, PodResources, PodResourcesSnapshot  # noqa: E402
from agent.kubelet.resolve import build_directory  # noqa: E402
from agent.pressure.eviction import Container  # noqa: E402
from agent.cpuset import CPUSet  # noqa: E402
from agent.contracts.hist import Histogram  # noqa: E402
from agent.pressure.metrics import container_series  # noqa: E402

PODS = 500
QOS = ("besteffort", "burstable", "")


def build(root: Path) -> PodResourcesSnapshot:
    logs = root / "log"
    (logs / "pods").mkdir(parents=True)
    (logs / "containers").mkdir()
    pods = []
    for i in range(PODS):
        uid, qos = str(uuid.uuid4()), QOS[i % 3]
        pod_dir = root / "cg" / "kubepods" / qos / f"pod{uid}" if qos else root / "cg" / "kubepods" / f"pod{uid}"
        ns, name = f"ns{i % 20}", f"pod-{i}"
        (logs / "pods" / f"{ns}_{name}_{uid}").mkdir()
        for j in range(3):
            cid = uuid.uuid4().hex + uuid.uuid4().hex
            (pod_dir / cid).mkdir(parents=True)
            if j:
                (logs / "containers" / f"{name}_{ns}_c{j}-{cid}.log").write_text("")
        pods.append(PodResources(ns, name, tuple(ContainerResources(f"c{j}", {"r": (f"d{i}-{j}",)}) for j in (1, 2))))
    return PodResourcesSnapshot(tuple(pods))


def floor_walk(root: Path) -> int:
    n = 0
    stack = [root / "cg", root / "log" / "pods", root / "log" / "containers"]
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                n += 1
                if e.is_dir(follow_symlinks=False):
                    stack.append(Path(e.path))
    return n


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    n = 5 if ap.parse_args().quick else 30
    with tempfile.TemporaryDirectory(prefix="hwagent-bench-kubelet-") as tmp:
        root = Path(tmp)
        snap = build(root)

        def refresh():
            return build_directory(walk_kubepods(root / "cg"), snap, read_log_names(root / "log"))

        d = refresh()
        assert len(d.containers) == 3 * PODS and sum(1 for c in d.containers if c.container) == 2 * PODS
        ours, floor = timed(refresh, n), timed(lambda: floor_walk(root), n)
        mo, mf = statistics.median(ours), statistics.median(floor)
        print(f"refresh (1,500 container cgroups, 500 pods): median {mo * 1e3:.1f} ms; "
              f"floor (bare scandir walk) {mf * 1e3:.1f} ms; ratio {mo / mf:.2f}x")

        cs = [Container(c.pod_uid, c.container, c.qos, CPUSet(), c.cgroup, c.namespace, c.pod) for c in d.containers]
        hists = {c.cgroup: Histogram(tuple(range(i % 7, i % 7 + 12)), i * 1000) for i, c in enumerate(d.containers)}

        def floor_sum():
            total = Histogram()
            for h in hists.values():
                total = total + h
            return total

        per, _ = container_series(hists, cs, 100)
        assert len(per) == 101
        ours, floor = timed(lambda: container_series(hists, cs, 100), n), timed(floor_sum, n)
        mo, mf = statistics.median(ours), statistics.median(floor)
        print(f"scrape (1,500 cgroups -> 100 series + other): median {mo * 1e3:.2f} ms; "
              f"floor (sum of the histograms) {mf * 1e3:.2f} ms; ratio {mo / mf:.2f}x")


if __name__ == "__main__":
    main()
