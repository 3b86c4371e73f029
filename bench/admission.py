"""Standalone admission benchmark: Admit latency over the admission socket, p50/p99.

Machine: synthetic 256 CPUs / 2 sockets / 8 NUMA nodes / 2 threads per core,
a device plugin (a real DevicePlugin gRPC server on a unix socket, PreStart
required) with 16 devices per NUMA node, topology manager single-numa-node,
container scope. 1,000 pods are admitted first (shared_cores, one container,
no device). Each timed operation is one Admit RPC of a 2-container pod with
dedicated_cores numa_binding (1 CPU each) and 1 device (the background pods
in their shared pool, ramp-up over): validation, topology
hints and merge, the CPU policy's Allocate (its checkpoint written), the
device manager's Allocate (the plugin's Allocate and PreStartContainer RPCs,
its checkpoint written), the registry record written; the pod is removed
afterwards (untimed) so the population stays at 1,000.

Floor measured in the same run: a no-op unary gRPC round trip on a unix
socket plus one write+fsync of a 4 KiB file in the same directory; the ratio
says what admission costs beyond the one network hop and one durable write it
cannot avoid.

Run: .venv/bin/python bench/admission.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.api.admission.v1 import api_pb2 as apb  # noqa: E402
from agent.api.admission.v1 import api_pb2_grpc as apb_grpc  # noqa: E402
from agent.api.deviceplugin.v1beta1 import api_pb2 as pb  # noqa: E402
from agent.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc  # noqa: E402
from agent.cpu.checkpoint import CheckpointStore  # noqa: E402
from agent.cpu.durable import DurablePolicy  # noqa: E402
from agent.cpu.policy import DynamicPolicy, PolicyOptions  # noqa: E402
from agent.devicemanager.manager import DeviceManager  # noqa: E402
from agent.topology.model import synthetic  # noqa: E402
from agent.topologymanager import TopologyManager, TopologyManagerConfig  # noqa: E402
from agent.workloads.admission import Workloads  # noqa: E402
from agent.workloads.registry import Registry  # noqa: E402
from agent.workloads.server import AdmissionServicer  # noqa: E402
from agent.workloads.store import PodFileStore  # noqa: E402

RES = "example.com/bench"
NODES = 8
PER_NODE = 16
BINDING = {"katalyst.kubewharf.io/qos_level": "dedicated_cores",
           "katalyst.kubewharf.io/memory_enhancement": json.dumps({"numa_binding": "true"})}


class Plugin(pb_grpc.DevicePluginServicer):
    def __init__(self) -> None:
        self.devs = [
            pb.Device(ID=f"dev-{n}-{i:02d}", health="Healthy", topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=n)]))
            for n in range(NODES) for i in range(PER_NODE)
        ]

    async def GetDevicePluginOptions(self, request, context):
        return pb.DevicePluginOptions(pre_start_required=True)

    async def ListAndWatch(self, request, context):
        yield pb.ListAndWatchResponse(devices=self.devs)
        await asyncio.Event().wait()

    async def Allocate(self, request, context):
        ids = request.container_requests[0].devices_ids
        r = pb.ContainerAllocateResponse(envs={"BENCH_DEVICES": ",".join(ids)})
        r.devices.extend(pb.DeviceSpec(container_path=f"/dev/{i}", host_path=f"/dev/{i}", permissions="rw") for i in ids)
        return pb.AllocateResponse(container_responses=[r])

    async def PreStartContainer(self, request, context):
        return pb.PreStartContainerResponse()


class Noop(apb_grpc.AdmissionServicer):
    async def List(self, request, context):
        return apb.ListResponse()


def manifest(name: str, dedicated: bool) -> bytes:
    if not dedicated:
        doc = {"metadata": {"name": name}, "spec": {"containers": [
            {"name": "c", "command": ["sleep", "1"], "resources": {"requests": {"cpu": "100m"}}}]}}
    else:
        doc = {"metadata": {"name": name, "annotations": BINDING}, "spec": {"containers": [
            {"name": "a", "command": ["sleep", "1"], "resources": {"limits": {"cpu": "1", RES: "1"}}},
            {"name": "b", "command": ["sleep", "1"], "resources": {"limits": {"cpu": "1"}}},
        ]}}
    return json.dumps(doc).encode()


async def cpu_durable(engine: DurablePolicy) -> None:
    """Every CPU policy change so far is on disk (checkpoint writer today, journal after it)."""
    wait = getattr(engine, "wait_durable", None)
    await (wait() if wait is not None else engine.persist.wait())


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


def fsync_4k(path: Path) -> float:
    data = os.urandom(4096)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


async def main(n: int, background: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="bench-adm-", dir="/tmp"))
    topo = synthetic(sockets=2, numa_per_socket=4, cores_per_numa=16, threads_per_core=2)
    plugin_server = grpc.aio.server()
    pb_grpc.add_DevicePluginServicer_to_server(Plugin(), plugin_server)
    plugin_server.add_insecure_port(f"unix:{base}/plugin.sock")
    await plugin_server.start()
    dm = DeviceManager(numa_ids=topo.numa_ids, checkpoint_path=base / "dm-checkpoint")
    await dm.start()
    await dm.register(RES, str(base / "plugin.sock"))
    while dm.capacity()[1].get(RES, 0) < NODES * PER_NODE:
        await asyncio.sleep(0.01)
    # shared pods join their pool after the transition period; 0 here, and ramp-up is
    # completed after setup, so the 1,000 background pods are in the steady state
    policy = DynamicPolicy(topo, PolicyOptions(reserved_count=2, transition_period_s=0), pod_running=lambda uid: True)
    store = CheckpointStore(base / "cpu")
    engine = DurablePolicy(policy, store)
    store.save(policy.state)  # snapshot + open journal, as the CPU component does at start
    cpu = engine
    registry = Registry(PodFileStore(base / "pods"))
    tm = TopologyManager(TopologyManagerConfig(policy="single-numa-node"), topo.numa_ids)
    w = Workloads(registry, tm, topo.numa_ids, cpu_policy=cpu, device_manager=dm, machine_memory_bytes=None)
    dm.active_pods = w

    server = grpc.aio.server()
    apb_grpc.add_AdmissionServicer_to_server(AdmissionServicer(w), server)
    server.add_insecure_port(f"unix:{base}/admission.sock")
    apb_grpc.add_AdmissionServicer_to_server(Noop(), noop := grpc.aio.server())
    noop.add_insecure_port(f"unix:{base}/noop.sock")
    await server.start()
    await noop.start()

    async with grpc.aio.insecure_channel(f"unix://{base}/admission.sock") as ch, \
            grpc.aio.insecure_channel(f"unix://{base}/noop.sock") as nch:
        stub, nstub = apb_grpc.AdmissionStub(ch), apb_grpc.AdmissionStub(nch)
        t0 = time.perf_counter()
        for i in range(background):
            await stub.Admit(apb.AdmitRequest(manifest=manifest(f"bg-{i}", False)))
        policy.complete_ramp_up()
        await cpu_durable(engine)
        print(f"setup: {background} shared pods admitted in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

        async def one(i: int) -> float:
            req = apb.AdmitRequest(manifest=manifest(f"m-{i}", True))
            t = time.perf_counter()
            await stub.Admit(req)
            dt = time.perf_counter() - t
            await stub.Remove(apb.RemoveRequest(pod=apb.PodRef(name=f"m-{i}")))
            return dt

        for i in range(20):  # warm-up
            await one(-1 - i)
        lat, floor = [], []
        for i in range(n):
            lat.append(await one(i))
            t = time.perf_counter()
            await nstub.List(apb.ListRequest())
            rt = time.perf_counter() - t
            floor.append(rt + await asyncio.get_running_loop().run_in_executor(None, fsync_4k, base / "floor.bin"))
        assert len(registry) == background
    f50, f99 = pct(floor, 0.5), pct(floor, 0.99)
    a50, a99 = pct(lat, 0.5), pct(lat, 0.99)
    print(f"admission: {NODES} NUMA nodes, {len(topo.cpus)} cpus, {NODES * PER_NODE} devices, "
          f"{background} pods admitted, {n} Admits of a 2-container dedicated numa_binding pod + 1 device")
    print(f"  {'floor: no-op gRPC + 4 KiB fsync':<36} p50 {f50 * 1e3:8.3f} ms  p99 {f99 * 1e3:8.3f} ms")
    print(f"  {'Admit over admission.sock':<36} p50 {a50 * 1e3:8.3f} ms  p99 {a99 * 1e3:8.3f} ms  "
          f"ratio to floor p50 {a50 / f50:5.1f}x  p99 {a99 / f99:5.1f}x")
    await server.stop(None)
    await noop.stop(None)
    await dm.stop()
    await plugin_server.stop(None)
    await cpu_durable(engine)
    import shutil

    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="100 Admits over 200 background pods")
    a = ap.parse_args()
    asyncio.run(main(100 if a.quick else 500, 200 if a.quick else 1000))
