"""The workload runtime on a real cgroup v2 kernel with two NUMA nodes (numa2), and on
the v1 / hybrid guests: what the host cannot show.

A dedicated, NUMA-bound pod on node 1 with one granted loop device: from inside the
workload, its CPUs, its memory node, the device opens and a managed, not-granted one
gives EPERM (on v2 through the BPF device program, with headers that match this
kernel); the v2 limits files; cgroup.kill of a process that ignores SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from agent.cgroups.detect import detect
from agent.cgroups.devbpf import DevicePrograms
from agent.cgroups.workload import WorkloadCgroups
from agent.runtime.config import RuntimeConfig
from agent.runtime.runtime import WorkloadRuntime
from agent.contracts.pods import QOS_DEDICATED, QOS_SHARED, DeviceGrant, DeviceNode, PodPhase
from tests.integration.runtime.conftest import FAST, Sink, make_pod, subtree_name

PROBE = ("import errno, os, sys\n"
         "print(open('/proc/self/status').read())\n"
         "for p in sys.argv[1:]:\n"
         "    try:\n"
         "        os.close(os.open(p, os.O_RDONLY)); print('open', p, 'ok')\n"
         "    except OSError as e:\n"
         "        print('open', p, errno.errorcode[e.errno])\n")


@pytest.fixture
def loops(tmp_path):
    devs = []
    for i in range(2):
        backing = tmp_path / f"disk{i}"
        with open(backing, "wb") as f:
            f.truncate(1 << 20)
        devs.append(subprocess.run(["losetup", "-f", "--show", str(backing)], check=True, capture_output=True,
                                   text=True).stdout.strip())
    yield devs
    for d in devs:
        subprocess.run(["losetup", "-d", d], check=False)


def node_cpus(node: int) -> list[int]:
    from agent.cpuset import CPUSet

    return sorted(CPUSet.parse(Path(f"/sys/devices/system/node/node{node}/cpulist").read_text()))


def test_numa_bound_pod_with_a_device_on_node1(topo, loops, tmp_path):
    if len(topo.nodes) < 2:
        pytest.skip("one NUMA node")
    layout = detect("/sys/fs/cgroup")
    subtree = subtree_name()
    bpf = DevicePrograms() if layout.mode == "v2" else None
    cg = WorkloadCgroups(layout, subtree, bpf)
    sink = Sink()
    cfg = RuntimeConfig(**{**vars(FAST), "pids_max": 64})
    granted, other = loops
    cpus = ",".join(map(str, node_cpus(1)[:2]))

    async def go():
        rt = WorkloadRuntime(cfg, cg, tmp_path / "root", lambda: sink, managed_devices=lambda: [granted, other])
        pod = make_pod("bound", ["/usr/bin/python3", "-S", "-c", PROBE, granted, other], qos=QOS_DEDICATED,
                       cpus=cpus, mems="1", grant=DeviceGrant(devices=(DeviceNode(granted, granted),)))
        await rt.run(pod)
        st = await sink.wait(pod.uid, lambda s: s.phase.terminal, timeout=120)
        assert st.phase == PodPhase.SUCCEEDED, st
        out = (tmp_path / "root/logs/default_bound/main.log").read_text()
        fields = dict(line.split(":\t", 1) for line in out.splitlines() if ":\t" in line)
        assert fields["Cpus_allowed_list"].strip() == cpus.replace(",", "-") or \
            fields["Cpus_allowed_list"].strip() == cpus
        assert fields["Mems_allowed_list"].strip() == "1"
        assert f"open {granted} ok" in out
        assert f"open {other} EPERM" in out
        # v2 limits of a shared pod with a CPU limit, and a kill of a SIGTERM-ignoring process
        ready = tmp_path / "ready"
        shr = make_pod("limits", ["sh", "-c", f"trap '' TERM; touch {ready}; while :; do sleep 0.1; done"],
                       qos=QOS_SHARED, cpus="0-3", cpu_request=500, cpu_limit=1500, memory=64 << 20)
        await rt.run(shr)
        for _ in range(600):  # TCG is slow: wait until the trap is set
            if ready.exists():
                break
            await asyncio.sleep(0.05)
        rel = f"{subtree}/pod{shr.uid}/main"
        if layout.mode == "v2":
            assert cg.read(rel, "cpu.weight") == "20"
            assert cg.read(rel, "cpu.max") == "150000 100000"
            assert cg.read(rel, "memory.max") == str(64 << 20)
        else:
            assert cg.read(rel, "cpu.shares") == "512"
            assert cg.read(rel, "cpu.cfs_quota_us") == "150000"
        assert cg.read(rel, "pids.max") == "64"
        await rt.stop(shr.uid, 0.5)
        assert sink.last(shr.uid).containers[0].exit_code == 137
        left = [p for h in cg.hierarchies for p, _d, _f in os.walk(h.root / subtree.lstrip("/"))
                if Path(p) != h.root / subtree.lstrip("/")]
        assert left == []

    try:
        asyncio.run(go())
    finally:
        for h in cg.hierarchies:
            try:
                (h.root / subtree.lstrip("/")).rmdir()
            except OSError:
                pass
