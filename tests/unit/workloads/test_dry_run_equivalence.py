"""Issue 21's measure: over random admission sequences, the dry run gives the
verdict and the placement of the admission that follows it, and writes nothing.

1,000 seeded sequences over the fixture machines of ``admission_node`` (2 and 4
NUMA nodes, one and two device resources, a plugin with a preferred
allocation, reserved cpus), every topology-manager policy and both scopes, both
``dedicated_numa`` rules (alternating per pass over the combinations),
pods of every QoS level (dedicated with and without numa_exclusive, one to
three containers, init containers, devices), pods removed and pods ending
(released) between admissions; every fourth sequence restarts every component
from its journal half way. Each admission is preceded by a dry run of the same
manifest; they must agree on: admitted or not, the refusal (code and message),
and per container the CPUs, memory nodes, NUMA affinity and devices.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import tempfile
from itertools import product
from pathlib import Path

from agent.cpu.pools import DEDICATED_NUMA_MODES
from agent.topologymanager import POLICIES, SCOPES
from agent.workloads.errors import AdmissionError
from agent.contracts.pods import PodPhase, PodStatus
from tests.unit.workloads.admission_node import MACHINES, Node

SEQUENCES = 1000
COMBOS = list(product(MACHINES, POLICIES, SCOPES))


def random_pod(rng: random.Random, machine, n: int) -> str:
    qos = rng.choice(["shared_cores", "shared_cores", "dedicated_cores", "dedicated_cores", "reclaimed_cores",
                      "system_cores"])
    ann = {"katalyst.kubewharf.io/qos_level": qos}
    if qos == "dedicated_cores":
        ann["katalyst.kubewharf.io/memory_enhancement"] = json.dumps(
            {"numa_binding": "true"} | ({"numa_exclusive": "true"} if rng.random() < 0.2 else {}))
    resources = sorted(machine.devices)

    def container(name: str) -> dict:
        cpu = str(rng.randint(1, 4)) if qos == "dedicated_cores" else rng.choice(["100m", "500m", "1", "2"])
        limits = {"cpu": cpu}
        if rng.random() < 0.4:
            limits[rng.choice(resources)] = rng.randint(1, 2)
        return {"name": name, "command": ["sleep", "1"], "resources": {"limits": limits}}

    spec = {"containers": [container(f"c{i}") for i in range(rng.choice([1, 1, 2, 3]))]}
    if rng.random() < 0.2:
        spec["initContainers"] = [container("init")]
    return json.dumps({"metadata": {"name": f"p{n}", "annotations": ann}, "spec": spec})


def _outcome_of_dry(res) -> tuple:
    return ("admitted",) if res.would_admit else ("refused", "RESOURCE_EXHAUSTED", f"{res.reason}; {res.free}")


def _placement_of_dry(res) -> dict:
    return {
        d.name: (d.cpus, d.mems, d.affinity, {r: tuple(i for rr, i, _ in d.devices if rr == r) for r, _, _ in d.devices})
        for d in res.decisions
    }


def _placement_of_pod(pod) -> dict:
    return {n: (a.cpus, a.mems, a.numa_affinity, dict(a.devices)) for n, a in pod.assignments.items()}


def _written(node: Node) -> tuple:
    """What a dry run must leave as it was: memory, journals, registry, plugin calls."""
    return (
        node.cpu_policy.state,
        node._engine.store.journal.seq,
        node.manager._journal.seq,
        tuple(sorted((a.key, a.device_ids) for a in node.manager.allocations())),
        tuple(sorted(r.uid for r in node.workloads.registry.records())),
        tuple(len(p.allocate_calls) for p in node.plugins.values()),
    )


async def one_sequence(seed: int, base: Path, stats: dict) -> list[str]:
    rng = random.Random(seed)
    machine, policy, scope = COMBOS[seed % len(COMBOS)]
    mode = DEDICATED_NUMA_MODES[seed // len(COMBOS) % len(DEDICATED_NUMA_MODES)]
    node = await Node(base, machine, policy, scope, mode).start()
    problems: list[str] = []
    steps = rng.randint(4, 8)
    try:
        for step in range(steps):
            if seed % 4 == 0 and step == steps // 2:
                await node.restart()
                stats["restarts"] += 1
            w = node.workloads
            live = [r for r in w.registry.records() if not r.status.phase.terminal]
            roll = rng.random()
            if live and roll < 0.12:
                await w.remove(rng.choice(live).pod.spec.name)
                continue
            if live and roll < 0.24:
                await w.pod_status_changed(rng.choice(live).uid, PodStatus(phase=PodPhase.FAILED, reason="Error"))
                continue
            manifest = random_pod(rng, machine, step)
            before = _written(node)
            try:
                dry = await w.admit_manifest(manifest, dry_run=True)
                want, placed = _outcome_of_dry(dry), _placement_of_dry(dry)
            except AdmissionError as e:
                want, placed = ("refused", e.code, e.message), {}
            if _written(node) != before:
                problems.append(f"seed {seed} step {step}: the dry run changed state")
            try:
                pod = (await w.admit_manifest(manifest)).pod
                got, made = ("admitted",), _placement_of_pod(pod)
                stats["admitted"] += 1
            except AdmissionError as e:
                got, made = ("refused", e.code, e.message), {}
                stats["refused"] += 1
            stats["verdicts"] += 1
            where = f"seed {seed} ({machine.name}, {policy}, {scope}, {mode}) step {step}"
            if want != got:
                problems.append(f"{where}: dry run {want} but admission {got}\n  {manifest}")
            elif placed != made:
                stats["placements"] += 1
                problems.append(f"{where}: dry run placed {placed} but admission {made}\n  {manifest}")
            elif made:
                stats["placements"] += 1
    finally:
        await node.stop()
    return problems


def test_dry_run_and_admission_agree_on_1000_random_sequences():
    root = Path(tempfile.mkdtemp(prefix="h21-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    stats = dict.fromkeys(("verdicts", "admitted", "refused", "placements", "restarts"), 0)

    async def main() -> list[str]:
        problems: list[str] = []
        for seed in range(SEQUENCES):
            base = root / f"s{seed}"
            problems += await one_sequence(seed, base, stats)
            shutil.rmtree(base, ignore_errors=True)
        return problems

    try:
        problems = asyncio.run(main())
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert not problems, f"{len(problems)} disagreements ({stats}):\n" + "\n".join(problems[:10])
    # the sequences exercise both verdicts, with and without restarts
    assert stats["admitted"] > 1500 and stats["refused"] > 300 and stats["restarts"] == SEQUENCES // 4, stats
