"""Real cgroup v1 writes on this kernel, under a test-owned subtree, CPUs 0-1 only."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cgroups.detect import detect
from agent.cgroups.fs import VANISHED, CgroupFS
from agent.cpuset import CPUSet

from .conftest import affinity, mkcg

pytestmark = pytest.mark.root
C = CPUSet.parse


def test_layout_is_hybrid_here():
    layout = detect("/sys/fs/cgroup")
    assert layout.mode in ("hybrid", "v1")
    assert not layout.is_v2("cpuset")


def test_narrow_then_widen_moves_real_process(v1_sandbox):
    name, make_proc = v1_sandbox
    fs = CgroupFS(detect())
    pod = f"/{name}/kubepods/podA"
    cont = f"{pod}/c1"
    for rel in (f"/{name}/kubepods", pod, cont):
        mkcg(rel, "0-1")
    p = make_proc(cont)
    assert affinity(p.pid) == {0, 1}
    # narrow the parent: the child must be narrowed first (else EBUSY on v1)
    rep = fs.apply_cpusets({pod: C("1"), cont: C("1")})
    assert rep.errors == [] and sorted(rep.written) == sorted([pod, cont])
    assert affinity(p.pid) == {1}
    # widen child only: the parent (not in the plan) is widened first
    rep = fs.apply_cpusets({cont: C("0-1")})
    assert rep.errors == []
    assert fs.read_cpus(pod) == C("0-1") and fs.read_cpus(cont) == C("0-1")
    assert affinity(p.pid) == {0, 1}
    # swap to cpu 0: widen-then-narrow never leaves the child outside the parent
    rep = fs.apply_cpusets({pod: C("0"), cont: C("0")})
    assert rep.errors == [] and affinity(p.pid) == {0}


def test_unplanned_child_is_clamped_before_parent_narrows(v1_sandbox):
    name, make_proc = v1_sandbox
    fs = CgroupFS(detect())
    pod = f"/{name}/podB"
    mkcg(pod, "0-1")
    mkcg(f"{pod}/pause", "0-1")
    p = make_proc(f"{pod}/pause")
    rep = fs.apply_cpusets({pod: C("0")})
    assert rep.errors == []
    assert fs.read_cpus(f"{pod}/pause") == C("0") and affinity(p.pid) == {0}


def test_new_cgroup_gets_mems_so_tasks_can_join(v1_sandbox):
    name, make_proc = v1_sandbox
    fs = CgroupFS(detect())
    rel = f"/{name}/fresh"
    d = Path("/sys/fs/cgroup/cpuset") / rel.lstrip("/")
    d.mkdir()
    assert (d / "cpuset.mems").read_text().strip() == ""
    rep = fs.apply_cpusets({rel: C("1")})
    assert rep.errors == []
    assert fs.read_mems(rel) == C("0")
    p = make_proc(rel)
    assert affinity(p.pid) == {1}


def test_vanished_cgroup_is_counted_not_raised(v1_sandbox):
    name, _ = v1_sandbox
    fs = CgroupFS(detect())
    before = VANISHED.labels("cpuset")._value.get()
    rep = fs.apply_cpusets({f"/{name}/gone/c": C("0")})
    assert rep.vanished == [f"/{name}/gone/c"] and rep.written == []
    assert VANISHED.labels("cpuset")._value.get() == before + 1


def test_cpu_idle_write_if_changed(v1_sandbox):
    name, _ = v1_sandbox
    fs = CgroupFS(detect())
    rel = f"/{name}"
    if fs.read_cpu_idle(rel) is None:
        pytest.skip("kernel without cpu.idle")
    assert fs.read_cpu_idle(rel) == 0
    assert fs.write_cpu_idle(rel, 1) is True
    assert Path(f"/sys/fs/cgroup/cpu/{name}/cpu.idle").read_text().strip() == "1"
    assert fs.write_cpu_idle(rel, 1) is False
    assert fs.write_cpu_idle(rel, 0) is True
