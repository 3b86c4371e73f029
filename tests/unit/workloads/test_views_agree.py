"""Issue 21's measure for CPUs: after any sequence of admissions, pool resizes (a
dedicated pod coming or going moves the shared pool), removals, pods ending
(eviction's path: a terminal status to admission) and restarts of every
component from its journal, every running container's CPUs are the same in
``hwagent ps``/``describe`` (the admission API), pod-resources ``List`` and its
cgroup's ``cpuset.cpus`` (written by the CPU enforcer into a fake cgroup tree),
because each of them asks the CPU policy when it answers.

Hypothesis draws the sequences over the fixture machines of ``admission_node``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.api.admission.v1 import api_pb2 as pb
from agent.api.podresources.v1 import api_pb2 as pr
from agent.cgroups.detect import detect
from agent.cgroups.fs import CgroupFS
from agent.contracts.pods import PodPhase, PodStatus
from agent.cpu.enforce import Enforcer
from agent.cpu.pools import DEDICATED_NUMA_MODES, DedicatedNuma
from agent.cpuset import CPUSet
from agent.podresources.server import PodResourcesServicer
from agent.workloads.errors import AdmissionError
from agent.workloads.server import AdmissionServicer
from tests.unit.workloads.admission_node import MACHINES, Node

SUBTREE = "/hwagent.slice"

ADMIT = st.tuples(st.just("admit"), st.sampled_from(["shared", "shared", "dedicated", "reclaimed"]),
                  st.integers(1, 4), st.integers(1, 2))
OTHER = st.tuples(st.sampled_from(["remove", "end", "restart"]), st.integers(0, 50))
OPS = st.lists(st.one_of(ADMIT, ADMIT, OTHER), min_size=1, max_size=10)


def _manifest(name: str, qos: str, cpus: int, containers: int) -> str:
    ann = {"katalyst.kubewharf.io/qos_level": f"{qos}_cores"}
    if qos == "dedicated":
        ann["katalyst.kubewharf.io/memory_enhancement"] = json.dumps({"numa_binding": "true"})
    cpu = str(cpus) if qos == "dedicated" else "500m"
    ctrs = [{"name": f"c{i}", "command": ["sleep", "1"], "resources": {"limits": {"cpu": cpu}}}
            for i in range(containers)]
    return json.dumps({"metadata": {"name": name, "annotations": ann}, "spec": {"containers": ctrs}})


class Cgroups:
    """A fake v2 cgroup tree: the runtime's cgroup creation and bind, the CPU enforcer's writes."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        (root / "cgroup.controllers").write_text("cpuset cpu\n")
        self.root = root
        self.fs = CgroupFS(detect(root))
        self.enforcer: Enforcer | None = None

    def path(self, uid: str, container: str) -> str:
        return f"{SUBTREE}/pod{uid}/{container}"

    async def start(self, node: Node, uid: str, container: str) -> None:
        d = self.root / self.path(uid, container).lstrip("/")
        if not d.is_dir():
            d.mkdir(parents=True)
            (d / "cpuset.cpus").write_text("\n")
            (d / "cpuset.mems").write_text("\n")
            await node._engine.bind_cgroup(uid, container, self.path(uid, container))

    def read(self, uid: str, container: str) -> CPUSet:
        return self.fs.read_cpus(self.path(uid, container))

    def sync(self, node: Node) -> None:
        if self.enforcer is None:
            self.enforcer = Enforcer(self.fs, node.cpu_policy.idx.numa_of)
        self.enforcer.sync(node.cpu_policy.state)


async def _views(node: Node) -> dict[str, dict]:
    w = node.workloads
    listed = await AdmissionServicer(w).List(pb.ListRequest(), None)
    ps = {(p.uid, c.name): CPUSet(c.cpu_ids) for p in listed.pods for c in p.containers}
    described = {}
    for p in listed.pods:
        got = (await AdmissionServicer(w).Get(pb.GetRequest(pod=pb.PodRef(name=p.name)), None)).pod
        described |= {(got.uid, c.name): CPUSet(c.cpu_ids) for c in got.containers}
    res = await PodResourcesServicer(cpus=lambda: w.cpu_policy, workloads=lambda: w,
                                     active_pods=lambda: w).List(pr.ListPodResourcesRequest(), None)
    uid_of = {(p.namespace, p.name): p.uid for p in listed.pods}
    podres = {(uid_of[(p.namespace, p.name)], c.name): CPUSet(c.cpu_ids) for p in res.pod_resources
              for c in p.containers}
    return {"ps": ps, "describe": described, "pod-resources": podres}


async def run_sequence(base: Path, machine_ix: int, ops: list[tuple], mode: DedicatedNuma = "whole-node") -> list[str]:
    node = await Node(base / "node", MACHINES[machine_ix], "best-effort", "container", mode).start()
    cg = Cgroups(base / "cgroup")
    problems: list[str] = []
    try:
        for step, op in enumerate(ops):
            w = node.workloads
            live = [r for r in w.registry.records() if not r.status.phase.terminal]
            if op[0] == "admit":
                try:
                    await w.admit_manifest(_manifest(f"p{step}", op[1], op[2], op[3]))
                except AdmissionError as e:
                    assert e.code == "RESOURCE_EXHAUSTED", e
            elif op[0] == "remove" and live:
                await w.remove(live[op[1] % len(live)].pod.spec.name)
            elif op[0] == "end" and live:
                await w.pod_status_changed(live[op[1] % len(live)].uid,
                                           PodStatus(phase=PodPhase.FAILED, reason="Evicted"))
            elif op[0] == "restart":
                await node.restart()
            running = [(r.uid, c.name) for r in node.workloads.registry.records()
                       if not r.status.phase.terminal and not r.released for c in r.pod.spec.containers]
            for uid, c in running:
                await cg.start(node, uid, c)
            cg.sync(node)
            views = await _views(node)
            for key in running:
                seen = {name: v.get(key) for name, v in views.items()} | {"cpuset.cpus": cg.read(*key)}
                if len(set(seen.values())) != 1 or not seen["ps"]:
                    problems.append(f"step {step} {op}: {key}: {seen}")
    finally:
        await node.stop()
    return problems


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machine_ix=st.integers(0, len(MACHINES) - 1), ops=OPS, mode=st.sampled_from(DEDICATED_NUMA_MODES))
def test_every_view_shows_the_cpus_the_cgroup_has(machine_ix: int, ops: list[tuple], mode: DedicatedNuma) -> None:
    base = Path(tempfile.mkdtemp(prefix="h21v-"))
    try:
        problems = asyncio.run(run_sequence(base, machine_ix, ops, mode))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert not problems, "\n".join(problems[:5])
