"""hwagent's NRI placement on a real cgroup v2 kernel: the VM tier's v2 guest (issue 34).

The host is hybrid v1, so there the reclaimed class is ``cpu.shares`` 2; on v2 hwagent
answers with the OCI ``unified`` map (``cpu.idle: 1``) and runc writes it. Only a v2 kernel
shows whether that path works end to end, and numa2 (two NUMA nodes) whether a dedicated
container's memory node is the one of its CPUs.

The same world as tests/integration/nri/test_placement.py (a private containerd 1.7 with NRI
on, the real hwagent daemon with ``[nri] enabled``, pods created through our CRI client as the
kubelet would), with the cgroup read-back of v2: the container's own cgroup's
``cpuset.cpus``/``.effective``, ``cpuset.mems``, ``cpu.idle``, ``cpu.weight``, and
``/proc/<pid>/status``. containerd runs with the CRI's default cgroup driver, cgroupfs
(``SystemdCgroup = false`` in runc's options): the guest has no systemd, and the systemd
driver would need one to make the pods' scopes. Each decision is compared with standalone
admission's dry run of the same pod, as on the host.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent.cpuset import CPUSet
from tests.cgroup_support import rmdir_cgroup_tree
from tests.integration.daemon.test_lifecycle import Daemon
from tests.integration.nri.containerd import Containerd, skip_reason
from tests.integration.nri.cri import CriClient
from tests.integration.nri.image import build_pause_archive
from tests.integration.nri.placement_world import COMPONENTS, KATALYST, NUMA_BINDING, World
from tests.vm.guest.v2_support import CGROUP2, budget, keep_artifacts, skip_unless_named_here, v2_readback, wait_until

#: TCG runs containerd, runc and the daemon ~10x slower than the host: the waits inside are calibrated
pytestmark = [pytest.mark.root, pytest.mark.timeout(1200)]

_SKIP = skip_unless_named_here(__file__) \
    or skip_reason() or (None if shutil.which("gcc") and shutil.which("ctr") else "needs gcc and ctr")
if _SKIP:
    pytestmark.append(pytest.mark.skip(reason=_SKIP))


# Why hwagent answers a reclaimed container's shares as 0 on v2 (found by this guest): NRI's update
# becomes a CRI UpdateContainerResources merged into the container's spec, which kept the CRI's
# cpu.shares (BestEffort's 2), and runc writes every resource again, cpu.weight before the unified
# map; the kernel refuses a weight on an idle group (sched_group_set_shares: EINVAL), so runc failed
# ('failed to write "1": write .../cpu.weight: invalid argument') and the reclaimed containers kept
# the old pool's CPUs (containerd 1.7.24, runc 1.1.5, Linux 6.1). Shares 0 is "no weight" in runc's conversion.


def runc_weight(shares: int) -> int:
    """cpu.weight runc writes for the CRI's cpu.shares on v2 (the OCI runtime spec's conversion,
    the one the kubelet documents): 1 + (shares - 2) * 9999 / 262142, integer division."""
    return 1 + ((shares - 2) * 9999) // 262142


@contextmanager
def v2_world() -> Iterator[World]:
    """placement_world's World with waits scaled to the guest (containerd and hwagent start
    several times slower under TCG than on the host)."""
    base = Path(tempfile.mkdtemp(prefix="nri-v2-", dir="/tmp"))
    # a tmpfs of its own: where the checkout lives under /tmp (a clone there, as CI may make), the
    # guest keeps the host's /tmp through its overlay root, and containerd's overlay snapshotter
    # cannot mount an overlay on an overlay ("failed to mount rootfs component: invalid argument")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0700", "tmpfs", str(base)], check=True)
    ctd = Containerd(base)
    parent = f"/hwagent-nri-v2-{uuid.uuid4().hex[:8]}"
    cri: CriClient | None = None
    w: World | None = None
    try:
        archive = build_pause_archive(base)
        ctd.start(timeout=budget(20))
        ctd.ctr("images", "import", str(archive), timeout=budget(60))
        cri = CriClient(ctd.cri_socket, timeout=budget(30))
        w = World(base, ctd, cri, parent)
        yield w
    finally:
        if cri is not None:
            try:
                for pod_id in cri.pod_ids():
                    cri.remove_pod(pod_id)
            finally:
                cri.close()
        if w is not None:
            for d in w.daemons:
                d.cleanup()
        ctd.stop()
        keep_artifacts("nri", [*base.glob("*.log"), base / "hw" / "stderr.log"])
        if (CGROUP2 / parent.lstrip("/")).is_dir():
            rmdir_cgroup_tree(CGROUP2 / parent.lstrip("/"))
        subprocess.run(["umount", "-l", str(base)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def start_hwagent(w: World) -> Daemon:
    d = Daemon(w.base / "hw", "--config", str(w.config()), components=COMPONENTS)
    w.daemons.append(d)
    wait_until("hwagent registered and synchronized with containerd", lambda: w.nri_state(d)["registered"], 20,
               lambda: None if d.proc.poll() is None else f"hwagent exited:\n{d.log()[-3000:]}")
    return d


def _placed(pid: int, cpus: CPUSet, mems: CPUSet | None = None) -> dict:
    """The container's cgroup and its process hold ``cpus`` (and ``mems`` when given), as the kernel says."""
    got = v2_readback(pid)
    assert (got["cpus"], got["cpus_effective"], got["cpus_allowed"]) == (cpus, cpus, cpus), got
    if mems is not None:
        assert (got["mems"], got["mems_effective"], got["mems_allowed"]) == (mems, mems, mems), got
    return got


@dataclass
class Placed:
    """The module's world after the first test: the daemon, the dedicated CPUs, and each running
    container's pod uid and pid (b shared, e and k reclaimed)."""

    w: World
    d: Daemon
    dedicated: CPUSet = field(default_factory=CPUSet)
    uids: dict[str, str] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)

    def where(self) -> dict[str, tuple[CPUSet, CPUSet]]:
        """name -> (the container cgroup's effective CPUs, the CPUs the policy holds for it)."""
        held = self.w.allocations()
        return {n: (v2_readback(pid)["cpus_effective"], held[self.uids[n]][1]) for n, pid in self.pids.items()}


@pytest.fixture(scope="module")
def placed() -> Iterator[Placed]:
    with v2_world() as w:
        yield Placed(w, start_hwagent(w))


def test_v2_guaranteed_burstable_besteffort_get_what_admission_decides_reclaimed_gets_cpu_idle(
        placed: Placed) -> None:
    w, d = placed.w, placed.d
    # Burstable 500m -> shared: the dry run's CPUs, cpu.weight from its shares, not idle
    want = w.dry_run("b", "shared_cores", "500m")
    bpod, _, b = w.run("b", "Burstable", milli=500)
    got = _placed(b, want[0])
    assert (got["idle"], got["weight"]) == (0, runc_weight(512)), got

    # BestEffort -> reclaimed: the reclaim pool and cpu.idle = 1 through the unified map
    want = w.dry_run("e", "reclaimed_cores", None)
    epod, _, e = w.run("e", "BestEffort")
    assert _placed(e, want[0])["idle"] == 1

    # Katalyst's annotation over a Burstable parent: reclaimed, idle
    want = w.dry_run("k", "reclaimed_cores", "500m")
    kpod, _, k = w.run("k", "Burstable", milli=500, annotations={KATALYST: "reclaimed_cores"})
    assert _placed(k, want[0])["idle"] == 1
    placed.uids = {"b": bpod.config.metadata.uid, "e": epod.config.metadata.uid, "k": kpod.config.metadata.uid}
    placed.pids = {"b": b, "e": e, "k": k}

    # Guaranteed 2 whole CPUs, NUMA-bound -> dedicated: its CPUs and the memory node of those CPUs
    want = w.dry_run("g", "dedicated_cores", "2", "64Mi", NUMA_BINDING)
    _, _, g = w.run("g", "Guaranteed", milli=2000)
    assert want[1] is not None and len(want[0]) == 2 and len(want[1]) == 1, want
    node = next(iter(want[1]))
    node_cpus = CPUSet.parse(Path(f"/sys/devices/system/node/node{node}/cpulist").read_text().strip())
    assert want[0] <= node_cpus, (want, node_cpus)
    got = _placed(g, want[0], want[1])
    assert (got["idle"], got["weight"]) == (0, runc_weight(2048)), got
    placed.dedicated = want[0]

    # the pools were re-sized around the dedicated CPUs: UpdateContainers moved the running shared
    # container to what the policy now holds for it, off the dedicated CPUs
    def shared_where_held() -> bool:
        got, held = placed.where()["b"]
        return got == held

    wait_until("the shared container where the CPU policy holds it", shared_where_held, 10,
               show=lambda: (placed.where(), w.status_detail()))
    got = _placed(b, w.allocations()[placed.uids["b"]][1])
    assert not got["cpus"] & placed.dedicated and got["idle"] == 0, got
    # every container is still of its class; nothing refused, nothing left unadjusted at creation
    assert v2_readback(e)["idle"] == 1 and v2_readback(k)["idle"] == 1
    allocs = w.allocations()
    assert sorted(q for q, _ in allocs.values()) == ["dedicated_cores", "reclaimed_cores", "reclaimed_cores",
                                                     "shared_cores"], allocs
    assert "0 refused, 0 running unadjusted" in w.status_detail()
    assert 'msg="nri adjustment refused"' not in d.log()


def test_v2_a_pool_resize_reaches_running_reclaimed_containers(placed: Placed) -> None:
    """The reclaim pool moved when the dedicated container came (the first test): the running
    reclaimed containers must follow it. They did not until hwagent answered their shares as 0
    (the comment at the top): runc failed containerd's update on cpu.weight, and the containers
    kept the old pool's CPUs, which may be the shared or dedicated ones now."""
    if not placed.pids:
        pytest.fail("the first test placed no containers")
    w = placed.w
    # containerd's refusal of the update ends the wait at once (the pool stays where it is after it)
    wait_until("the reclaimed containers where the CPU policy holds them",
               lambda: all(got == held for n, (got, held) in placed.where().items() if n != "b"), 10,
               alive=lambda: (f"containerd failed the updates: {errors}; placed: {placed.where()}"
                              if (errors := _update_errors(w)) else None),
               show=lambda: (placed.where(), w.status_detail()))


def _update_errors(w: World) -> list[str]:
    """containerd's log lines of NRI updates that failed (runc's error, with the file it wrote)."""
    return [ln[:400] for ln in w.containerd.log_text().splitlines() if "NRI update of" in ln and "failed" in ln]
