"""Built-in device plugin benchmark.

1. Hotplug latency: a real virtual link is added/removed (``ip link``, dummy
   or ifb), and we time, from just before the command, (a) the kernel uevent
   reaching a bare pyudev netlink monitor on the same loop - the floor any
   uevent-driven agent pays - and (b) the ListAndWatch update carrying the
   change reaching a kubelet-like gRPC client over a unix socket (uevent ->
   inventory re-read -> rule assignment -> snapshot -> stream). Ratio b/a
   and the added cost b-a.
2. Allocate latency with 256 devices on 4 NUMA nodes: Allocate of 1 and of 8
   devices, and GetPreferredAllocation of 8 out of 256, against a no-op
   round trip (GetDevicePluginOptions, which does no work) on the same
   server and socket, interleaved in the same run.

Needs root for part 1 (skipped otherwise). Run:
    .venv/bin/python bench/deviceplugin.py [--rounds N] [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import grpc  # noqa: E402
import pyudev  # noqa: E402

from agent.api.deviceplugin.v1beta1 import api_pb2 as pb  # noqa: E402
from agent.api.deviceplugin.v1beta1 import api_pb2_grpc as pb_grpc  # noqa: E402
from agent.devices.config import DevicesConfig, ResourceRule  # noqa: E402
from agent.devices.model import Device, DevNode, PCIInfo  # noqa: E402
from agent.deviceplugin.server import DevicePluginServer, PluginDevice, socket_name  # noqa: E402
from agent.deviceplugin.plugins import DevicePluginsComponent  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def ms(x: float) -> str:
    return f"{x * 1e3:.3f} ms"


async def _ip(*args: str) -> None:
    proc = await asyncio.create_subprocess_exec("ip", *args, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {err.decode().strip()}")


async def _link_kind() -> str:
    for kind in ("dummy", "ifb"):
        try:
            await _ip("link", "add", "hwbprobe", "type", kind)
        except RuntimeError:
            continue
        await _ip("link", "del", "hwbprobe")
        return kind
    raise RuntimeError("neither dummy nor ifb links can be created here")


async def bench_hotplug(rounds: int) -> None:
    kind = await _link_kind()
    tmp = Path(tempfile.mkdtemp(prefix="hwbdp", dir="/tmp"))
    name = "hwbench0"
    cfg = DevicesConfig(default_rules=False, resources=(ResourceRule(name="bench.hwagent.io/link", net_name=("hwbench*",)),))
    svc = DevicePluginsComponent(cfg, plugin_dir=tmp, registration_socket=tmp / "none.sock", hotplug=True,
                              hotplug_source="kernel")
    # the plugin must exist before the first link: start it with the link present
    await _ip("link", "add", name, "type", kind)
    await svc.start()
    await _ip("link", "del", name)
    loop = asyncio.get_running_loop()
    raw_seen: dict[str, float] = {}
    mon = pyudev.Monitor.from_netlink(pyudev.Context(), source="kernel")
    mon.filter_by("net")
    mon.start()

    def on_raw() -> None:
        while (dev := mon.poll(timeout=0)) is not None:
            if dev.sys_name == name:
                raw_seen[dev.action] = time.perf_counter()

    loop.add_reader(mon.fileno(), on_raw)
    ch = grpc.aio.insecure_channel(f"unix://{tmp / socket_name('bench.hwagent.io/link')}")
    stub = pb_grpc.DevicePluginStub(ch)
    stream = stub.ListAndWatch(pb.Empty())
    law: asyncio.Queue[tuple[float, set[str]]] = asyncio.Queue()

    async def reader() -> None:
        async for resp in stream:
            await law.put((time.perf_counter(), {d.ID for d in resp.devices}))

    rt = loop.create_task(reader())
    await law.get()  # initial snapshot
    raw: list[float] = []
    full: list[float] = []
    try:
        for _ in range(rounds):
            for action, args, present in (("add", ("link", "add", name, "type", kind), True),
                                          ("remove", ("link", "del", name), False)):
                raw_seen.pop(action, None)
                t0 = time.perf_counter()
                await _ip(*args)
                while True:
                    t, ids = await asyncio.wait_for(law.get(), 10)
                    if (name in ids) == present:
                        break
                while action not in raw_seen:
                    await asyncio.sleep(0.0005)
                raw.append(raw_seen[action] - t0)
                full.append(t - t0)
    finally:
        rt.cancel()
        loop.remove_reader(mon.fileno())
        await ch.close()
        await svc.stop()
        await _ip("link", "del", name) if os.path.exists(f"/sys/class/net/{name}") else None
        shutil.rmtree(tmp, ignore_errors=True)
    added = [f - r for f, r in zip(full, raw, strict=True)]
    print(f"hotplug ({kind} link add/remove, {len(full)} events, from just before `ip link`):")
    print(f"  raw uevent at a bare monitor:      p50 {ms(pct(raw, 50))}  p99 {ms(pct(raw, 99))}")
    print(f"  ListAndWatch update at the client: p50 {ms(pct(full, 50))}  p99 {ms(pct(full, 99))}")
    print(f"  added by hwagent (update - uevent): p50 {ms(pct(added, 50))}  p99 {ms(pct(added, 99))}")
    print(f"  ratio update/uevent: p50 {pct(full, 50) / pct(raw, 50):.2f}x  p99 {pct(full, 99) / pct(raw, 99):.2f}x")


def _devices(n: int, nodes: int) -> list[PluginDevice]:
    out = []
    for i in range(n):
        addr = f"0000:{0x10 + i // 32:02x}:{(i % 32):02x}.0"
        out.append(PluginDevice(Device(
            id=addr, kind="pci", name=addr, sysfs_path="/", driver="vfio-pci", numa_node=i % nodes,
            pci=PCIInfo(address=addr, vendor="15b3", device="1018", class_code="020000", iommu_group=100 + i,
                        physfn="0000:0f:00.0"),
            dev_nodes=(DevNode(f"/dev/vfio/{100 + i}", "vfio"),))))
    return out


async def bench_allocate(calls: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="hwbdp", dir="/tmp"))
    rule = ResourceRule(name="bench.hwagent.io/vf", sriov="vf", driver=("vfio-pci",), dev_nodes=("vfio",),
                        extra_dev_nodes=("/dev/vfio/vfio",))
    server = DevicePluginServer(rule, tmp / "vf.sock")
    devs = _devices(256, 4)
    server.update(devs)
    await server.start()
    ids = [d.id for d in devs]
    ch = grpc.aio.insecure_channel(f"unix://{server.socket_path}")
    stub = pb_grpc.DevicePluginStub(ch)
    kinds = {
        "no-op (GetDevicePluginOptions)": lambda: stub.GetDevicePluginOptions(pb.Empty()),
        "Allocate 1 of 256": lambda: stub.Allocate(pb.AllocateRequest(
            container_requests=[pb.ContainerAllocateRequest(devices_ids=ids[7:8])])),
        "Allocate 8 of 256": lambda: stub.Allocate(pb.AllocateRequest(
            container_requests=[pb.ContainerAllocateRequest(devices_ids=ids[0:32:4])])),
        "GetPreferredAllocation 8 of 256": lambda: stub.GetPreferredAllocation(pb.PreferredAllocationRequest(
            container_requests=[pb.ContainerPreferredAllocationRequest(available_deviceIDs=ids, allocation_size=8)])),
    }
    times: dict[str, list[float]] = {k: [] for k in kinds}
    try:
        for _ in range(50):  # warm-up
            for f in kinds.values():
                await f()
        for _ in range(calls):  # interleaved so machine noise hits all alike
            for k, f in kinds.items():
                t = time.perf_counter()
                await f()
                times[k].append(time.perf_counter() - t)
    finally:
        await ch.close()
        await server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    base = times["no-op (GetDevicePluginOptions)"]
    print(f"gRPC over a unix socket, 256 devices on 4 NUMA nodes, {calls} calls each:")
    for k, xs in times.items():
        line = f"  {k:34s} p50 {ms(pct(xs, 50))}  p99 {ms(pct(xs, 99))}"
        if xs is not base:
            line += f"  ratio vs no-op: p50 {pct(xs, 50) / pct(base, 50):.2f}x  p99 {pct(xs, 99) / pct(base, 99):.2f}x"
        print(line)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100, help="link add+remove rounds (default 100)")
    ap.add_argument("--calls", type=int, default=2000, help="RPCs per kind (default 2000)")
    args = ap.parse_args()
    if os.geteuid() == 0:
        await bench_hotplug(args.rounds)
    else:
        print("hotplug: skipped (needs root to create links)")
    await bench_allocate(args.calls)


if __name__ == "__main__":
    asyncio.run(main())
