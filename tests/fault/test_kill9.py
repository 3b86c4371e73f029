"""kill -9 at random points of an allocate/release sequence, then restart:
nothing acknowledged is lost, nothing released (or refused) comes back.

Two owners of allocation state are hit: the CPU policy of a real daemon over
gRPC (Allocate / RemovePod on its socket), and the device host in a process of
its own (tests/fault/devicehost_child.py). The only operation allowed to go
either way is the one in flight when the kill landed.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
from agent.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_KEY
from agent.devicemanager.manager import DeviceManager
from tests.fault.conftest import COUNTS

CPU_TRIALS = 15
DEVICE_TRIALS = 15
REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 120  # a shared two-core machine: generous, never a timing assertion


def _seed() -> int:
    return int(os.environ.get("HWAGENT_FAULT_SEED", str(random.randrange(1 << 30))))


def _request(uid: str, rng: random.Random) -> pb.ResourceRequest:
    qos = rng.choice(["shared_cores", "shared_cores", "reclaimed_cores", "dedicated_cores"])
    cpus = 1.0 if qos == "dedicated_cores" else rng.choice([0.1, 0.5, 1.0])
    ann = {QOS_KEY: qos}
    if qos == "dedicated_cores":
        ann[MEMORY_ENHANCEMENT_KEY] = '{"numa_binding": "true"}'
    return pb.ResourceRequest(
        pod_uid=uid, pod_namespace="ns", pod_name=uid, container_name="c", container_type=pb.MAIN,
        resource_name="cpu", resource_requests={"cpu": cpus}, annotations=ann,
        hint=pb.TopologyHint(nodes=[0], preferred=True) if qos == "dedicated_cores" else None,
    )


def _cpu_pods(sock: Path) -> set[str]:
    with grpc.insecure_channel(f"unix://{sock}") as ch:
        r = pb_grpc.ResourcePluginStub(ch).GetResourcesAllocation(pb.GetResourcesAllocationRequest(), timeout=60)
    return set(r.pod_resources)


class CPUWorkload:
    """Allocate/RemovePod at random until the daemon stops answering."""

    def __init__(self, sock: Path, rng: random.Random, present: set[str], trial: int,
                 alive: Callable[[], bool]) -> None:
        self.sock, self.rng, self.present, self.trial, self.alive = sock, rng, present, trial, alive
        self.inflight: str | None = None
        self.acked = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        with grpc.insecure_channel(f"unix://{self.sock}") as ch:
            stub = pb_grpc.ResourcePluginStub(ch)
            while True:
                if self.present and self.rng.random() < 0.4:
                    uid, op = self.rng.choice(sorted(self.present)), "remove"
                else:
                    uid, op = f"t{self.trial}-{n}", "alloc"
                    n += 1
                self.inflight = uid
                try:
                    if op == "alloc":
                        stub.Allocate(_request(uid, self.rng), timeout=60)
                        self.present.add(uid)
                    else:
                        stub.RemovePod(pb.RemovePodRequest(pod_uid=uid), timeout=60)
                        self.present.discard(uid)
                except grpc.RpcError as e:
                    if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED) or not self.alive():
                        return  # killed: this one stays in flight, whatever the error said
                    # refused (no room, say): it must have changed nothing
                self.inflight = None
                self.acked += 1


def test_kill9_during_cpu_allocate_release_over_grpc(short_dir, daemon_factory):
    seed = _seed()
    rng = random.Random(seed)
    print(f"seed={seed}")
    present: set[str] = set()
    inflight: str | None = None
    for trial in range(CPU_TRIALS + 1):
        d = daemon_factory(short_dir)
        restored = _cpu_pods(d.sockets.cpu)
        slack = {inflight} if inflight else set()
        lost = present - restored - slack
        resurrected = restored - present - slack
        assert not lost and not resurrected, (f"seed={seed} trial={trial}", lost, resurrected)
        COUNTS["kill9 cpu: restarts checked"] += 1
        COUNTS["kill9 cpu: pods checked"] += len(restored | present)
        present = set(restored)
        if trial == CPU_TRIALS:
            d.stop()
            break
        w = CPUWorkload(d.sockets.cpu, rng, present, trial, d.alive)
        w.thread.start()
        time.sleep(rng.uniform(0.05, 1.0))
        d.kill9()
        w.thread.join(120)
        assert not w.thread.is_alive()
        inflight = w.inflight
        COUNTS["kill9 cpu: trials"] += 1
        COUNTS["kill9 cpu: kills with a call in flight"] += inflight is not None
        COUNTS["kill9 cpu: acknowledged operations"] += w.acked
        d.cleanup()


def _restored_devices(base: Path) -> dict[str, tuple[str, ...]]:
    async def read():
        m = DeviceManager(numa_ids=(0, 1), checkpoint_path=base / "dp" / "checkpoint")
        await m.start()
        out = {a.pod_uid: a.device_ids for a in m.allocations()}
        await m.stop()
        return out

    return asyncio.run(read())


def _expected(lines: list[str], before: dict[str, tuple[str, ...]]):
    """(acknowledged state, the uid in flight) from one child's ack file."""
    state = dict(before)
    inflight = None
    for line in lines:
        kind, _, rest = line.partition(" ")
        if kind == "begin":
            inflight = rest.split()[1]
        elif kind == "done":
            op, uid, *devs = rest.split()
            if op == "alloc":
                state[uid] = tuple(devs[0].split(","))
            else:
                state.pop(uid, None)
            inflight = None
        elif kind == "failed":
            inflight = None
    return state, inflight


def test_kill9_during_device_host_allocate_release(short_dir):
    seed = _seed()
    rng = random.Random(seed)
    print(f"seed={seed}")
    state: dict[str, tuple[str, ...]] = {}
    for trial in range(DEVICE_TRIALS):
        ack = short_dir / f"ack-{trial}"
        ack.touch()
        child = subprocess.Popen([sys.executable, "-m", "tests.fault.devicehost_child", str(short_dir),
                                  str(seed + trial), str(ack)], cwd=REPO, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=open(short_dir / f"child-{trial}.log", "w"))
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while "ready" not in ack.read_text().splitlines():
                assert child.poll() is None, (short_dir / f"child-{trial}.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "device host child never got ready"
                time.sleep(0.02)
            time.sleep(rng.uniform(0.05, 0.8))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(60)
        lines = ack.read_text().splitlines()
        have = {line.split()[1]: tuple(line.split()[2].split(",")) for line in lines if line.startswith("have ")}
        assert have == state, f"seed={seed} trial={trial}: the child restored {have}, expected {state}"
        expected, inflight = _expected([line for line in lines if not line.startswith(("have", "ready"))], state)
        restored = _restored_devices(short_dir)
        slack = {inflight} if inflight else set()
        for uid in set(expected) | set(restored):
            if uid in slack:
                continue
            assert restored.get(uid) == expected.get(uid), (f"seed={seed} trial={trial} uid={uid}",
                                                            restored.get(uid), expected.get(uid))
        held = [dv for devs in restored.values() for dv in devs]
        assert len(held) == len(set(held)), f"seed={seed} trial={trial}: a device held twice: {restored}"
        state = restored
        COUNTS["kill9 devices: trials"] += 1
        COUNTS["kill9 devices: kills with an operation in flight"] += inflight is not None
        COUNTS["kill9 devices: allocations checked"] += len(set(expected) | set(restored))
        COUNTS["kill9 devices: acknowledged operations"] += sum(1 for line in lines if line.startswith("done "))
