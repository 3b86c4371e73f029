"""Shared requests beyond the CPUs shared pods may use are admitted, and the user is told
(issue 37 item 13): `web` (500m) and `work` (1 CPU) were both admitted onto one shared CPU
beside a dedicated pod without a word. The decision: keep Katalyst's rule (a shared_cores
request is a weight for CPU time, not a reservation; the kubelet's CPU manager admits
Burstable pods the same way), and say so where the user sees it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agent.cpu.overcommit import overcommit_note
from agent.topology.model import synthetic
from tests.unit.workloads.admission_node import Machine, Node

ONE_NODE = Machine("1n", synthetic(sockets=1, numa_per_socket=1, cores_per_numa=2, threads_per_core=1), {})


def test_the_note_names_the_requests_the_cpus_and_what_to_do() -> None:
    assert overcommit_note(1.0, 1) is None and overcommit_note(0.5, 1) is None
    note = overcommit_note(1.5, 1)
    assert note is not None
    assert note.startswith("shared pods request 1.5 CPUs in all, more than the 1 CPU they may run on"), note
    assert "not a reservation" in note and "--qos dedicated" in note, note
    assert overcommit_note(3.0, 0) is not None


def pod(name: str, qos: str, cpu: str) -> str:
    ann = {"katalyst.kubewharf.io/qos_level": qos}
    if qos == "dedicated_cores":
        ann["katalyst.kubewharf.io/memory_enhancement"] = json.dumps({"numa_binding": "true"})
    res = {"requests": {"cpu": cpu}, **({"limits": {"cpu": cpu}} if qos == "dedicated_cores" else {})}
    return json.dumps({"metadata": {"name": name, "annotations": ann},
                       "spec": {"containers": [{"name": "c", "command": ["true"], "resources": res}]}})


def test_the_admission_that_overcommits_the_shared_cpus_says_so(tmp_path: Path) -> None:
    async def main() -> list[tuple[str, ...]]:
        node = await Node(tmp_path, ONE_NODE, "none", "container", "exclusive-cores").start()
        try:
            w = node.workloads
            out = []
            for name, qos, cpu in (("job", "dedicated_cores", "1"), ("web", "shared_cores", "500m"),
                                   ("work", "shared_cores", "1"), ("idle", "shared_cores", "0")):
                out.append((await w.admit_manifest(pod(name, qos, cpu))).warnings)
            return out
        finally:
            await node.stop()

    job, web, work, idle = asyncio.run(main())
    assert job == () and web == (), (job, web)
    assert idle == (), "a pod that asks for no CPU time adds nothing to warn about"
    assert len(work) == 1 and work[0].startswith("shared pods request 1.5 CPUs in all, more than the 1 CPU"), work
