"""hwagent's placement reaches containers through a real containerd's NRI, read back from the kernel.

The real daemon (CPU policy, memory manager, standalone admission for the dry runs, the NRI
component) registers with a private containerd 1.7; pods are created through the CRI as the
kubelet would create them (``placement_world``). For each container the test first asks
standalone admission's dry run what the equivalent pod manifest would get, then creates the
container and reads what the kernel applied: the container's cpuset cgroup, its cpu.shares and
``/proc/<pid>/status``. On a machine of one NUMA node and N CPUs (2 here) a dedicated container
of N-1 CPUs leaves the shared pool one (pushed to the running shared container), and a second
dedicated container is refused: it would leave shared pods no CPU.
"""

from __future__ import annotations

import shutil
import statistics
import threading
import time
from pathlib import Path

import pytest

from agent.cpuset import CPUSet
from tests.integration.nri.containerd import skip_reason
from tests.integration.nri.placement_world import KATALYST, NUMA_BINDING, World, readback, wait_for, world_of

pytestmark = [pytest.mark.root, pytest.mark.slow]

_SKIP = skip_reason() or (None if shutil.which("gcc") and shutil.which("ctr") else "needs gcc and ctr")
ALL = CPUSet.parse(Path("/sys/devices/system/cpu/online").read_text().strip())
_NODES = [d for d in Path("/sys/devices/system/node").glob("node[0-9]*")]
if not _SKIP and (len(_NODES) > 1 or len(ALL) < 2):
    _SKIP = "written for one NUMA node with 2 CPUs or more (dedicated pods take all but one, one stays shared)"
if not _SKIP and not (Path("/sys/fs/cgroup/cpuset").is_dir() and Path("/sys/fs/cgroup/cpu").is_dir()):
    _SKIP = "reads cgroup v1 cpuset and cpu controllers"
if _SKIP:
    pytestmark.append(pytest.mark.skip(reason=_SKIP))



def _same(w: World, pid: int, cpus: CPUSet, mems: CPUSet | None = None) -> dict:
    got = readback(pid)
    assert (got["cgroup_cpus"], got["cpus_allowed"]) == (cpus, cpus), got
    if mems is not None:
        assert (got["cgroup_mems"], got["mems_allowed"]) == (mems, mems), got
    return got


def _figures(w: World, label: str) -> None:
    got = w.decide_ms()
    if not got:
        return
    wall, cpu = sorted(a for a, _ in got), sorted(b for _, b in got)

    def p99(v: list[float]) -> float:
        return v[min(len(v) - 1, int(len(v) * 0.99))]

    procs = ", ".join(f"{k} {v:.2f} s" for k, v in w.cpu_seconds().items())
    print(f"\n{label}: CreateContainer decision over {len(got)} containers: wall p50 {statistics.median(wall):.2f} "
          f"ms, p99 {p99(wall):.2f} ms; loop CPU p50 {statistics.median(cpu):.2f} ms, p99 {p99(cpu):.2f} ms; "
          f"process CPU (utime+stime) {procs}; loadavg {Path('/proc/loadavg').read_text().strip()}")


def test_each_qos_gets_what_standalone_admission_decides_and_a_refusal_is_repaired() -> None:
    with world_of("nri-place-") as w:
        d = w.start_hwagent()

        # Burstable 500m -> shared: the dry run's CPUs (every CPU shared pods may use while ramping up)
        want = w.dry_run("b", "shared_cores", "500m")
        _, _, b = w.run("b", "Burstable", milli=500)
        assert _same(w, b, want[0])["shares"] == 512

        # BestEffort -> reclaimed: the reclaim pool, and the lowest cpu.shares
        want = w.dry_run("e", "reclaimed_cores", None)
        _, _, e = w.run("e", "BestEffort")
        assert _same(w, e, want[0])["shares"] == 2

        # Katalyst's annotation wins over the cgroup parent (a Burstable parent, reclaimed): low shares
        want = w.dry_run("k", "reclaimed_cores", "500m")
        _, _, k = w.run("k", "Burstable", milli=500, annotations={KATALYST: "reclaimed_cores"})
        assert _same(w, k, want[0])["shares"] == 2

        # Guaranteed, N-1 whole CPUs -> dedicated and NUMA-bound: its CPUs, its memory node
        n = len(ALL) - 1
        want = w.dry_run("g", "dedicated_cores", str(n), "64Mi", NUMA_BINDING)
        gpod, _, g = w.run("g", "Guaranteed", milli=n * 1000)
        _same(w, g, want[0], want[1])
        assert len(want[0]) == n and want[1] == CPUSet({0})

        # the shared pool shrank to the other CPU: pushed to the running shared container's cgroup
        rest = ALL - want[0]
        wait_for("the shared container moved off the dedicated CPU", lambda: readback(b)["cgroup_cpus"] == rest)
        _same(w, b, rest)
        allocs = w.allocations()
        assert sorted(q for q, _ in allocs.values()) == ["dedicated_cores", "reclaimed_cores", "reclaimed_cores",
                                                         "shared_cores"]

        # a second Guaranteed container would leave no CPU to shared pods: refused, counted, and it runs
        # (unadjusted: the cgroup's CPUs are its parent's)
        _, _, g2 = w.run("g2", "Guaranteed", milli=1000)
        assert Path(f"/proc/{g2}").exists() and readback(g2)["cgroup_cpus"] == ALL
        assert "1 refused, 1 running unadjusted" in w.status_detail()
        assert 'msg="nri adjustment refused"' in d.log()
        assert w.metric(d, 'hwagent_nri_adjustments_total{outcome="refused",qos="dedicated_cores"}') == 1.0
        assert sum(q == "dedicated_cores" for q, _ in w.allocations().values()) == 1

        # the first dedicated pod goes: its CPUs are released and the refused container is repaired there
        w.cri.remove_pod(gpod.id)
        wait_for("the refused container placed", lambda: len(readback(g2)["cgroup_cpus"]) == 1)
        g2_cpus = _same(w, g2, readback(g2)["cgroup_cpus"], want[1])["cgroup_cpus"]
        assert g2_cpus <= want[0]
        assert "0 running unadjusted" in w.status_detail()
        # the shared pool is everything else now, and the shared container follows it (never g2's CPU)
        wait_for("the shared container on the grown pool", lambda: readback(b)["cgroup_cpus"] == ALL - g2_cpus)
        _figures(w, "placement test")


def test_kill_9_restart_synchronize_and_containerd_restart_reconcile_without_double_booking() -> None:
    """hwagent killed -9 (with a pod gone and one created meanwhile; also mid-creation), containerd
    restarted, both killed -9: each time Synchronize leaves the owners holding exactly the runtime's
    pods, each dedicated CPU once, and the containers where the owners hold them."""
    with world_of("nri-sync-") as w:
        d = w.start_hwagent()
        apod, _, a = w.run("a", "Guaranteed", milli=1000)
        a_cpus = readback(a)["cgroup_cpus"]
        assert len(a_cpus) == 1

        # hwagent killed -9; while it is down the pod goes and another Guaranteed pod comes: containerd
        # runs it without hwagent (unadjusted: every CPU)
        w.kill_hwagent(d)
        w.cri.remove_pod(apod.id)
        _, _, c = w.run("c", "Guaranteed", milli=1000)
        assert readback(c)["cgroup_cpus"] == ALL
        # back: Synchronize releases the gone pod, places the new one, pushes it to the running container
        d = w.start_hwagent()
        wait_for("the pod created while hwagent was down placed", lambda: len(readback(c)["cgroup_cpus"]) == 1)
        sync = w.synchronized(d)[-1]
        assert (sync["released"], sync["placed"], sync["updates"]) == ("1", "1", "1"), sync
        allocs = w.allocations()
        assert list(allocs) == [u for u in allocs if u.startswith("c-")], allocs  # a's CPUs went back

        # killed -9 while pods are being created: whatever the runtime ran is placed once, nothing twice
        made: list[int] = []

        def create() -> None:
            for i in range(2):
                made.append(w.run(f"s{i}", "Burstable", milli=200)[2])

        t = threading.Thread(target=create)
        t.start()
        time.sleep(0.15)
        w.kill_hwagent(d)
        t.join(60)
        d = w.start_hwagent()
        allocs = wait_for("both shared pods held", lambda: (lambda a: a if len(a) == 3 else None)(w.allocations()))
        dedicated = [cpus for q, cpus in allocs.values() if q == "dedicated_cores"]
        assert len(dedicated) == 1 and dedicated[0] == readback(c)["cgroup_cpus"]
        for pid in made:  # the shared ones run off the dedicated CPU, as the policy holds them
            wait_for("shared off the dedicated CPU", lambda pid=pid: readback(pid)["cgroup_cpus"] == ALL - dedicated[0])

        # containerd restarted: hwagent registers again, Synchronize finds every pod: nothing released or moved
        before = w.allocations()
        w.containerd.stop()
        w.containerd.start()
        wait_for("registered again", lambda: len(w.synchronized(d)) >= 2, 30)
        assert w.synchronized(d)[-1]["released"] == "0"
        assert w.allocations() == before
        assert readback(c)["cgroup_cpus"] == dedicated[0]

        # both killed -9, then back: the same placements, nothing released, moved or booked twice
        w.kill_hwagent(d)
        w.kill_containerd()
        w.containerd.start()
        d = w.start_hwagent()
        assert w.synchronized(d)[-1]["released"] == "0"
        assert w.allocations() == before
        assert readback(c)["cgroup_cpus"] == dedicated[0]
        for pid in made:
            assert readback(pid)["cgroup_cpus"] == ALL - dedicated[0]
        _figures(w, "restart test")
