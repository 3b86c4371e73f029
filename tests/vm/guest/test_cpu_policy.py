"""The CPU policy enforced on a real multi-NUMA kernel, on the cgroup layout this guest
booted with (numa2: cgroup v2 with cpuset+cpu controllers, numa4: v1, memonly: hybrid).

What the host cannot show: a real cgroup v2 cpuset hierarchy (the host's v2 mount has no
controllers), NUMA-bound dedicated CPUs on a node other than 0, and a real process whose
affinity follows every plan (new pods, pool changes, drift, removal).

The CPU component runs as the daemon runs it (tests/integration/cpu/common.py), pointed at
a test-owned subtree that holds the kubepods layout, so nothing else is touched.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent.contracts import CPU_POLICY
from agent.contracts.hints import TopologyHint
from agent.contracts.cpu import Request
from agent.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_KEY
from agent.cpuset import CPUSet
from agent.topology.sysfs import read_topology
from tests.cgroup_support import rmdir_cgroup, spawn_in
from tests.integration.cpu.common import component, make_ctx

CG = Path("/sys/fs/cgroup")
DED, SHR, REC = "ded00000-0000-4000-8000-000000000001", "shr00000-0000-4000-8000-000000000002", "rec00000-0000-4000-8000-000000000003"  # noqa: E501
DED2 = "ded00000-0000-4000-8000-000000000004"
CID = {DED: "a" * 64, SHR: "b" * 64, REC: "c" * 64, DED2: "d" * 64}
POD_DIR = {DED: f"kubepods/pod{DED}", SHR: f"kubepods/burstable/pod{SHR}", REC: f"kubepods/besteffort/pod{REC}",
           DED2: f"kubepods/pod{DED2}"}  # fmt: skip


def mems_allowed(pid: int) -> CPUSet:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Mems_allowed_list:"):
            return CPUSet.parse(line.split(":", 1)[1].strip())
    raise AssertionError("no Mems_allowed_list")


def utime_ticks(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11])


@dataclass
class Sandbox:
    """A test-owned cgroup subtree, presented to hwagent as its cgroup root."""

    v2: bool
    name: str
    root: Path  # what hwagent gets as cgroup_root
    mems: str
    made: list[Path] = field(default_factory=list)
    procs: list[subprocess.Popen] = field(default_factory=list)

    def dirs(self, rel: str) -> list[Path]:
        """The directories of `rel` in every hierarchy hwagent uses (v2: one)."""
        if self.v2:
            return [CG / self.name / rel]
        return [CG / ctl / self.name / rel for ctl in ("cpuset", "cpu")]

    def mkdir(self, rel: str) -> Path:
        for d in self.dirs(rel):
            for p in reversed([d, *d.parents]):
                if p.exists():
                    continue
                if self.v2:  # a child gets controllers only if its parent delegates them
                    (p.parent / "cgroup.subtree_control").write_text("+cpuset +cpu")
                p.mkdir()
                self.made.append(p)
                if not self.v2 and "cpuset" in p.parts:
                    (p / "cpuset.cpus").write_text((p.parent / "cpuset.cpus").read_text())
                    (p / "cpuset.mems").write_text(self.mems)
        return self.dirs(rel)[0]

    def spawn(self, rel: str, argv: tuple[str, ...] = ("sleep", "600")) -> subprocess.Popen:
        p = spawn_in(self.dirs(rel), argv)
        self.procs.append(p)
        return p

    def cpuset_file(self, rel: str) -> Path:
        return self.dirs(rel)[0] / "cpuset.cpus"

    def effective(self, rel: str) -> CPUSet:
        name = "cpuset.cpus.effective" if self.v2 else "cpuset.effective_cpus"
        return CPUSet.parse((self.dirs(rel)[0] / name).read_text())

    def cleanup(self) -> None:
        for p in self.procs:  # all killed first: a waiting SIGKILLed idle hog may need its CPU
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for p in self.procs:
            p.wait(timeout=30)
        for d in sorted(self.made, key=lambda p: -len(p.parts)):
            rmdir_cgroup(d, tries=100, pause_s=0.05)


@pytest.fixture
def sandbox(cgroup_layout: str) -> Iterator[Sandbox]:
    if cgroup_layout == "none":
        pytest.skip("guest booted without cgroups")
    name = f"hwagent-vmtest-{secrets.token_hex(3)}"
    mems = (CG / "cpuset.mems.effective").read_text().strip() if cgroup_layout == "v2" else \
        (CG / "cpuset" / "cpuset.mems").read_text().strip()
    short = Path(tempfile.mkdtemp(prefix="hwvm-"))  # unix socket paths must stay short
    if cgroup_layout == "v2":
        box = Sandbox(True, name, CG / name, mems)
        box.mkdir("kubepods")
    else:  # v1 and hybrid drive cpuset/cpu through v1; hwagent gets a root of two links
        (short / "cg").mkdir()
        box = Sandbox(False, name, short / "cg", mems)
        box.mkdir("kubepods")
        for ctl in ("cpuset", "cpu"):
            os.symlink(CG / ctl / name, short / "cg" / ctl)
    try:
        yield box
    finally:
        box.cleanup()
        shutil.rmtree(short, ignore_errors=True)


def dedicated(uid: str, cpus: int, node: int) -> Request:
    return Request(pod_uid=uid, container_name="app", resource_requests={"cpu": cpus}, hint=TopologyHint(frozenset({node}), True),
                   annotations={QOS_KEY: "dedicated_cores", MEMORY_ENHANCEMENT_KEY: '{"numa_binding":"true"}'})


def test_policy_enforced_on_real_cgroups_with_processes(sandbox: Sandbox) -> None:
    t = read_topology()
    cpu_nodes = [i for i in t.numa_ids if t.cpus_of_numa(i)]
    far = cpu_nodes[-1]
    work = Path(tempfile.mkdtemp(prefix="hwvmroot-"))
    ctx = make_ctx(work, t, sandbox.root, reserved_cpus=1, reclaim_min_cpus=1, transition_period_s=0,
                   sync_cpu_idle=True, cpu_idle=True, cpuset_check_interval_s=3600, cpu_idle_interval_s=3600)
    containers = {uid: f"{POD_DIR[uid]}/{CID[uid]}" for uid in CID}
    for uid in (DED, SHR, REC):
        sandbox.mkdir(containers[uid])
    procs = {uid: sandbox.spawn(containers[uid]) for uid in (DED, SHR, REC)}

    def aff(uid: str) -> CPUSet:
        return CPUSet(os.sched_getaffinity(procs[uid].pid))

    async def main() -> None:
        comp = component(ctx)
        await comp.start(ctx)
        try:
            assert comp.fs is not None and comp.fs.layout.mode == ("v2" if sandbox.v2 else "v1")
            svc = ctx.lookup(CPU_POLICY)
            reserved = svc.policy.reserved
            d = (await svc.allocate(dedicated(DED, 2, far))).allocation
            s = (await svc.allocate(Request(pod_uid=SHR, container_name="app", resource_requests={"cpu": 1},
                                            annotations={QOS_KEY: "shared_cores"}))).allocation
            r = (await svc.allocate(Request(pod_uid=REC, container_name="app", resource_requests={"cpu": 1},
                                            annotations={QOS_KEY: "reclaimed_cores"}))).allocation
            assert d is not None and s is not None and r is not None
            rep = await comp.check_once()  # ramp-up ends (transition 0), then every plan applied
            assert rep is not None and rep.errors == [] and rep.unresolved == 0
            alloc = {a.pod_uid: a.cpuset for a in svc.allocations()}
            # dedicated: NUMA-bound to the hinted node, alone on its CPUs
            assert alloc[DED] <= t.cpus_of_numa(far) and len(alloc[DED]) == 2
            assert not alloc[DED] & (alloc[SHR] | alloc[REC] | reserved)
            assert not alloc[SHR] & reserved and not alloc[REC] & reserved
            for uid in (DED, SHR, REC):  # the kernel holds exactly the plan, and processes follow it
                rel = containers[uid]
                assert CPUSet.parse(sandbox.cpuset_file(rel).read_text()) == alloc[uid], uid
                assert sandbox.effective(rel) == alloc[uid], uid
                assert aff(uid) == alloc[uid], uid

            # a second dedicated pod on another node narrows the shared pool under a live process
            # (needs a third node with CPUs: a node holding a NUMA-bound container leaves the
            # shared pool, and the shared containers must keep a node)
            near = next((n for n in cpu_nodes[:-1] if len(t.cpus_of_numa(n) - reserved) >= 2), None)
            if near is not None and len(cpu_nodes) >= 3:
                sandbox.mkdir(containers[DED2])
                procs[DED2] = sandbox.spawn(containers[DED2])
                await svc.allocate(dedicated(DED2, 2, near))
                rep = await comp.check_once()
                assert rep is not None and rep.errors == []
                alloc = {a.pod_uid: a.cpuset for a in svc.allocations()}
                assert alloc[DED2] <= t.cpus_of_numa(near) and not alloc[DED2] & (alloc[SHR] | alloc[DED])
                assert not alloc[SHR] & alloc[DED2] and not alloc[REC] & alloc[DED2]
                for uid in (DED, SHR, REC, DED2):
                    assert aff(uid) == alloc[uid], uid

            # drift by hand is found and repaired; the process goes back
            wrong = t.cpus_of_numa(cpu_nodes[0])
            sandbox.cpuset_file(containers[DED]).write_text(str(wrong))
            assert aff(DED) == wrong
            rep = await comp.check_once()
            assert rep is not None and [p for p, _, _ in rep.drift] == [f"/{containers[DED]}"]
            assert rep.repaired == [f"/{containers[DED]}"] and aff(DED) == alloc[DED]

            # removing the first dedicated pod gives its CPUs back to the pools
            await svc.release_pod(DED)
            rep = await comp.check_once()
            assert rep is not None and rep.errors == []
            alloc = {a.pod_uid: a.cpuset for a in svc.allocations()}
            assert (alloc[SHR] | alloc[REC]) & d.cpuset, "freed dedicated CPUs went to no pool"
            for uid in (SHR, REC):
                assert aff(uid) == alloc[uid], uid

            # cpu.idle on the reclaimed (besteffort) root
            assert await comp.cpu_idle_once() is True
            idle_file = (CG / sandbox.name if sandbox.v2 else CG / "cpu" / sandbox.name) / "kubepods/besteffort/cpu.idle"
            assert idle_file.read_text().strip() == "1"
            assert await comp.cpu_idle_once() is False
        finally:
            await comp.stop()
            shutil.rmtree(work, ignore_errors=True)

    asyncio.run(asyncio.wait_for(main(), 240))


def test_cpu_idle_written_by_hwagent_yields_to_normal_tasks(cgroup_layout: str, sandbox: Sandbox) -> None:
    """cpu.idle=1 on the reclaimed root (written through hwagent's driver) makes a hog
    there yield to a normal hog on the same CPU: the kernel really applies it."""
    from agent.cgroups.detect import detect
    from agent.cgroups.fs import CgroupFS

    fs = CgroupFS(detect(sandbox.root))
    sandbox.mkdir("kubepods/besteffort/hog")
    sandbox.mkdir("kubepods/burstable/hog")
    assert fs.write_cpu_idle("/kubepods/besteffort", 1) is True
    cpu = max(os.sched_getaffinity(0))
    hog = ("/bin/sh", "-c", "while :; do :; done")
    idle = sandbox.spawn("kubepods/besteffort/hog", hog)
    normal = sandbox.spawn("kubepods/burstable/hog", hog)
    for p in (idle, normal):
        os.sched_setaffinity(p.pid, {cpu})
    time.sleep(0.5)
    i0, n0 = utime_ticks(idle.pid), utime_ticks(normal.pid)
    time.sleep(3)
    i1, n1 = utime_ticks(idle.pid), utime_ticks(normal.pid)
    print(f"cpu{cpu}: idle hog {i1 - i0} ticks, normal hog {n1 - n0} ticks")
    assert n1 - n0 > 20, "the normal hog barely ran: load too light to mean anything"
    assert (i1 - i0) * 5 < n1 - n0


def test_numa_bound_container_memory_follows_its_node(sandbox: Sandbox) -> None:
    """cpuset.mems of a NUMA-bound container is its node: the process's memory policy follows."""
    t = read_topology()
    far = [i for i in t.numa_ids if t.cpus_of_numa(i)][-1]
    work = Path(tempfile.mkdtemp(prefix="hwvmroot-"))
    ctx = make_ctx(work, t, sandbox.root, reserved_cpus=1, cpuset_check_interval_s=3600)
    rel = f"{POD_DIR[DED]}/{CID[DED]}"
    sandbox.mkdir(rel)
    proc = sandbox.spawn(rel)

    async def main() -> CPUSet:
        comp = component(ctx)
        await comp.start(ctx)
        try:
            await ctx.lookup(CPU_POLICY).allocate(dedicated(DED, 1, far))
            await comp.check_once()
            return mems_allowed(proc.pid)
        finally:
            await comp.stop()
            shutil.rmtree(work, ignore_errors=True)

    assert asyncio.run(asyncio.wait_for(main(), 120)) == CPUSet([far])
