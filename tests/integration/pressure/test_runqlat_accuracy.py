"""The key proof: per-cgroup run-queue delay from the probe equals the sum of the
cgroup's threads' /proc/<tid>/schedstat run_delay over the same window, on the
v1 cpu hierarchy (what this hybrid host uses) and on cgroup v2."""

from __future__ import annotations

import os
import time

import pytest

from agent.cgroups.hierarchy import CgroupIndex, Hierarchy
from agent.cgroups.mounts import cgroup_mounts
from agent.cgroups.tree import cgroup_thread_ids
from agent.pressure.procfs import run_delay_ns
from agent.pressure.readers import BpfRunqueue, rollup

pytestmark = [pytest.mark.root, pytest.mark.bpf]

TOLERANCE = 0.05  # "within a few percent"


def _measure(reader: BpfRunqueue, mount, rel: str, seconds: float) -> tuple[int, int]:
    tids = cgroup_thread_ids(mount, rel)
    s0 = run_delay_ns(tids)
    b0 = rollup(reader.read(), rel).sum_ns
    time.sleep(seconds)
    b1 = rollup(reader.read(), rel).sum_ns
    s1 = run_delay_ns(tids)
    assert set(s1) == set(s0), "a hog exited during the window"
    sched = sum(s1[t] - s0[t] for t in s0)
    return b1 - b0, sched


def _hogs(tree, dirs, n: int):
    for _ in range(n):
        tree.spawn(dirs)
    time.sleep(0.5)  # every hog has been switched out in its cgroup at least once


@pytest.mark.slow
def test_v1_cpu_hierarchy_matches_schedstat(probe_set, hierarchy, cgroup_tree):
    if hierarchy.is_v2:
        pytest.skip("host is pure cgroup v2; the v2 test covers it")
    d = cgroup_tree.make(hierarchy.name, "pod-a/hog")
    rel = cgroup_tree.rel("pod-a/hog")
    _hogs(cgroup_tree, [d], 2 * os.cpu_count() + 2)  # more runnable threads than CPUs
    reader = BpfRunqueue(probe_set, CgroupIndex(hierarchy.mount))
    bpf, sched = _measure(reader, hierarchy.mount, rel, 3.0)
    print(f"v1 {hierarchy.name}: bpf={bpf / 1e6:.1f} ms schedstat={sched / 1e6:.1f} ms")
    assert sched > 1e9, "hogs did not wait: the test load is too light to mean anything"
    assert abs(bpf - sched) / sched < TOLERANCE
    # the pod level (parent cgroup) rolls the container up: both from one reading of the map
    # (two reads let the container's later figure outgrow the pod's earlier one)
    snapshot = reader.read()
    assert rollup(snapshot, cgroup_tree.rel("pod-a")).sum_ns >= rollup(snapshot, rel).sum_ns > 0


@pytest.mark.slow
def test_v2_matches_schedstat(cgroup_tree):
    pytest.importorskip("bcc")
    from agent.pressure.probes import ProbeSet

    mounts = cgroup_mounts()
    if "v2" not in mounts:
        pytest.skip("no cgroup2 mount")
    h = Hierarchy("v2", mounts["v2"])
    ps = ProbeSet(["runqlat"], hierarchy="v2")  # its own compile: the hierarchy is a build macro
    ps.load()
    try:
        assert ps.active("runqlat"), ps.states["runqlat"]
        d = cgroup_tree.make("v2", "pod-b/hog")
        rel = cgroup_tree.rel("pod-b/hog")
        _hogs(cgroup_tree, [d], 2 * os.cpu_count() + 2)
        reader = BpfRunqueue(ps, CgroupIndex(h.mount))
        bpf, sched = _measure(reader, h.mount, rel, 3.0)
        print(f"v2: bpf={bpf / 1e6:.1f} ms schedstat={sched / 1e6:.1f} ms")
        assert sched > 1e9
        assert abs(bpf - sched) / sched < TOLERANCE
    finally:
        ps.close()
