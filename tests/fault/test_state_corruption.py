"""Truncation and bit flips of every state file under a daemon's root are detected.

Generic over "the state files in <root>": whatever regular files a daemon
leaves under its root after a clean stop (checkpoints today, a journal after
the durable-state work) are each corrupted at chosen and random offsets, and a
daemon is started on the result. A corruption counts as

- detected: the daemon refuses to start naming the file, or starts and reports
  it (a warning/error line naming the file, or the file set aside as
  ``<name>.corrupt-*``);
- harmless: not reported, and the daemon serves exactly what it served from the
  intact files (gRPC: CPU allocations, pod-resources List and allocatable);
- silent: anything else. One silent corruption fails the test.
"""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

import grpc

from agent.api.podresources.v1 import api_pb2 as pr
from agent.api.podresources.v1 import api_pb2_grpc as pr_grpc
from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
from agent.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_KEY
from tests.fault.conftest import COUNTS
from tests.fault.daemon import CONFIG, RunningDaemon
from tests.fault.test_kill9 import _seed

RANDOM_PER_FILE = 4
#: no transition period: what a shared container is served must not depend on when it is asked
STABLE = CONFIG.replace("[cpu]\n", "[cpu]\ntransition_period_s = 0.0\n")  # random truncations and random bit flips, each, per file


def _served(d: RunningDaemon) -> tuple[bytes, bytes, bytes]:
    s = d.sockets
    with grpc.insecure_channel(f"unix://{s.cpu}") as ch:
        cpu = pb_grpc.ResourcePluginStub(ch).GetResourcesAllocation(pb.GetResourcesAllocationRequest(), timeout=60)
    with grpc.insecure_channel(f"unix://{s.pod_resources}") as ch:
        stub = pr_grpc.PodResourcesListerStub(ch)
        listed = stub.List(pr.ListPodResourcesRequest(), timeout=60)
        # the built-in device plugins register after READY: wait (bounded) until their devices are listed
        deadline = time.monotonic() + 30
        alloc = stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=60)
        while not alloc.devices and time.monotonic() < deadline:
            time.sleep(0.1)
            alloc = stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=60)
    return (cpu.SerializeToString(deterministic=True), listed.SerializeToString(deterministic=True),
            alloc.SerializeToString(deterministic=True))


def _state_files(root: Path) -> dict[Path, bytes]:
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name != "hwagent.pid" and ".corrupt" not in p.name}


def _reset(root: Path, pristine: dict[Path, bytes]) -> None:
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.relative_to(root) not in pristine:
            p.unlink()
    for rel, data in pristine.items():
        (root / rel).write_bytes(data)


def _corruptions(data: bytes, rng: random.Random):
    n = len(data)
    cuts = sorted({0, 1, n // 2, n - 1, *(rng.randrange(n) for _ in range(RANDOM_PER_FILE))} - {n})
    for c in cuts:
        yield f"truncate@{c}", data[:c]
    for _ in range(RANDOM_PER_FILE + 2):
        i, bit = rng.randrange(n), rng.randrange(8)
        b = bytearray(data)
        b[i] ^= 1 << bit
        yield f"flip@{i}.{bit}", bytes(b)


def _reported(log: str, name: str) -> bool:
    return any(re.search(r"level=(warning|error)", line) and name in line for line in log.splitlines())


def test_truncation_and_bit_flips_of_every_state_file_are_detected(short_dir, daemon_factory):
    seed = _seed()
    rng = random.Random(seed)
    print(f"seed={seed}")
    assert STABLE != CONFIG
    d = daemon_factory(short_dir, config=STABLE)
    with grpc.insecure_channel(f"unix://{d.sockets.cpu}") as ch:
        stub = pb_grpc.ResourcePluginStub(ch)
        for i, (qos, cpus) in enumerate([("shared_cores", 0.5), ("reclaimed_cores", 0.1), ("shared_cores", 1.0),
                                         ("shared_cores", 0.2)]):
            stub.Allocate(pb.ResourceRequest(
                hint=pb.TopologyHint(nodes=[0], preferred=True) if qos == "dedicated_cores" else None,
                pod_uid=f"pod-{i}", pod_namespace="ns", pod_name=f"p{i}", container_name="c",
                container_type=pb.MAIN, resource_name="cpu", resource_requests={"cpu": cpus},
                annotations={QOS_KEY: qos, **({MEMORY_ENHANCEMENT_KEY: '{"numa_binding": "true"}'}
                                              if qos == "dedicated_cores" else {})}), timeout=60)
    assert d.stop() == 0
    root = d.root
    pristine = _state_files(root)
    assert pristine, "the daemon left no state files"
    baseline_daemon = daemon_factory(short_dir, config=STABLE)
    baseline = _served(baseline_daemon)
    assert baseline_daemon.stop() == 0
    _reset(root, pristine)

    detected = harmless = total = 0
    silent: list[str] = []
    for rel, data in pristine.items():
        for what, bad in _corruptions(data, rng):
            _reset(root, pristine)
            (root / rel).write_bytes(bad)
            trial = RunningDaemon.start(short_dir, config=STABLE, wait=False)
            try:
                rc = trial.ready_or_exit()
                if rc is None:
                    set_aside = [p for p in (root / rel).parent.iterdir() if p.name.startswith(rel.name + ".corrupt")]
                    served = _served(trial)
                    trial.stop()
                    log = trial.log()
                    if set_aside or _reported(log, rel.name):
                        detected += 1
                    elif served == baseline:
                        harmless += 1
                    else:
                        silent.append(f"{rel} {what}")
                else:
                    log = trial.log()
                    assert rc != 0 and rel.name in log, (rel, what, rc, log[-2000:])
                    detected += 1
            finally:
                trial.cleanup()
            total += 1
            COUNTS[f"corruption: trials {rel}"] += 1
    _reset(root, pristine)
    COUNTS["corruption: state files"] += len(pristine)
    COUNTS["corruption: trials"] += total
    COUNTS["corruption: detected"] += detected
    COUNTS["corruption: harmless (served state unchanged, not reported)"] += harmless
    COUNTS["corruption: silent"] += len(silent)
    print(f"corruption detected/total = {detected}/{total}, harmless {harmless}, silent {len(silent)}")
    assert not silent, f"seed={seed}: accepted without a report and served differently: {silent}"
