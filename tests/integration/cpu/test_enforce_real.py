"""The component enforcing cpusets on real cgroup v1 (this kernel), detecting
hand-made drift and repairing it, with a real process whose affinity is read
back; cpu.idle synced on a real reclaimed root. Uses CPUs 0-1 only.

The test-owned subtree /sys/fs/cgroup/{cpuset,cpu}/hwagent-test-<rand> is
presented to the component as a cgroup root through symlinks, so the kubepods
layout lives inside it and nothing outside is touched."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path

import pytest

from agent.contracts import CPU_POLICY
from agent.contracts.hints import TopologyHint
from agent.cpu.errors import PolicyError
from agent.cpu.metrics import DRIFT_FOUND, DRIFT_REPAIRED
from agent.contracts.cpu import Request
from agent.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_KEY
from agent.cpuset import CPUSet
from agent.topology.sysfs import read_topology
from tests.integration.cgroups.conftest import affinity, mkcg, v1_sandbox  # noqa: F401 - fixture

from .common import component, make_ctx

pytestmark = pytest.mark.root
UID = "7d1c0c8e-aaaa-bbbb-cccc-0123456789ab"
CID = "c" * 64


def test_enforce_detect_and_repair_drift(v1_sandbox, tmp_path):  # noqa: F811
    name, make_proc = v1_sandbox
    topo = read_topology()
    if not topo.online >= CPUSet([0, 1]):
        pytest.skip("needs cpus 0-1 online")
    cont = f"/kubepods/pod{UID}/{CID}"
    for rel in ("/kubepods", f"/kubepods/pod{UID}", cont):
        mkcg(f"/{name}{rel}", "0-1")
    Path(f"/sys/fs/cgroup/cpu/{name}/kubepods/besteffort").mkdir(parents=True)
    proc = make_proc(f"/{name}{cont}")
    cg = tmp_path / "cg"
    cg.mkdir()
    os.symlink(f"/sys/fs/cgroup/cpuset/{name}", cg / "cpuset")
    os.symlink(f"/sys/fs/cgroup/cpu/{name}", cg / "cpu")
    ctx = make_ctx(tmp_path / "root", topo, cg, reserved_cpus=0, sync_cpu_idle=True, cpu_idle=True)

    async def main():
        comp = component(ctx)
        await comp.start(ctx)
        try:
            assert comp.fs is not None and comp.fs.layout.mode == "v1"
            svc = ctx.lookup(CPU_POLICY)
            r = await svc.allocate(
                Request(
                    pod_uid=UID,
                    container_name="app",
                    resource_requests={"cpu": 1},
                    annotations={
                        QOS_KEY: "dedicated_cores",
                        MEMORY_ENHANCEMENT_KEY: '{"numa_binding":"true","numa_exclusive":"false"}',
                    },
                    hint=TopologyHint(frozenset({0}), True),
                )
            )
            want = set(r.allocation.cpuset)
            assert len(want) == 1
            rep = await comp.check_once()
            assert affinity(proc.pid) == want
            assert rep.drift == []
            # drift made by hand
            found0, rep0 = DRIFT_FOUND._value.get(), DRIFT_REPAIRED._value.get()
            Path(f"/sys/fs/cgroup/cpuset/{name}{cont}/cpuset.cpus").write_text("0-1")
            assert affinity(proc.pid) == {0, 1}
            rep = await comp.check_once()
            assert [d[0] for d in rep.drift] == [cont] and rep.repaired == [cont]
            assert affinity(proc.pid) == want
            assert DRIFT_FOUND._value.get() == found0 + 1 and DRIFT_REPAIRED._value.get() == rep0 + 1
            # repair off: found, reported, left alone
            comp.cfg = dataclasses.replace(comp.cfg, repair_drift=False)
            Path(f"/sys/fs/cgroup/cpuset/{name}{cont}/cpuset.cpus").write_text("0-1")
            rep = await comp.check_once()
            assert len(rep.drift) == 1 and rep.repaired == [] and affinity(proc.pid) == {0, 1}
            # cpu.idle on the reclaimed root
            assert await comp.cpu_idle_once() is True
            assert Path(f"/sys/fs/cgroup/cpu/{name}/kubepods/besteffort/cpu.idle").read_text().strip() == "1"
            assert await comp.cpu_idle_once() is False
            # a container whose cgroup is gone: reported as vanished, no crash
            await svc.release_pod(UID)
            await svc.allocate(Request(pod_uid="p2", container_name="c", resource_requests={"cpu": 1}))
            # a bind of a cgroup that is not there: refused (nothing may start on unwritten CPUs), nothing changed
            with pytest.raises(PolicyError, match="not written: the cgroup is gone"):
                await svc.bind_cgroup("p2", "c", "/kubepods/podgone/c")
            assert svc.policy.state.get("p2", "c").cgroup_path is None
            rep = await comp.check_once()
            assert rep.vanished == [] and rep.errors == []
        finally:
            await comp.stop()

    asyncio.run(main())
