"""`hwagent run` as it runs on a node: installed and started by vagrant/provision.sh (the
script the users' Vagrant VM runs), serving its CPU plugin over gRPC and /metrics, stopped,
restarted from its checkpoint, stopped again with nothing left behind.

Only the guest shows it whole: the daemon's probes compile against headers that match the
running kernel, and its CPU policy enforces into a cgroup layout with controllers (here, v2
with cpuset+cpu on numa2). The guest has no systemd, so provision.sh starts the unit's own
ExecStart line (with the unit's environment file) instead of systemctl.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
from agent.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_KEY
from agent.cpuset import CPUSet
from agent.topology.sysfs import read_topology

REPO = Path(__file__).resolve().parents[3]
PROVISION = REPO / "vagrant" / "provision.sh"
ROOT = Path("/var/lib/hwagent")
CPU_SOCKET = ROOT / "cpu" / "qrm_cpu_plugin_dynamic.sock"  # standalone mode
METRICS = "http://127.0.0.1:9464"
LOG = Path("/var/log/hwagent.log")


def provision(*args: str) -> subprocess.CompletedProcess:
    p = subprocess.run(["bash", str(PROVISION), "--no-setup", "--timeout", "240", *args],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"provision.sh {' '.join(args)} rc {p.returncode}\n{p.stderr}\n{log_tail()}"
    return p


def log_tail() -> str:
    try:
        return "--- /var/log/hwagent.log ---\n" + "\n".join(LOG.read_text().splitlines()[-40:])
    except OSError:
        return "(no daemon log)"


def daemon_pid() -> int | None:
    try:
        return int((ROOT / "hwagent.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def scrape() -> dict[str, list]:
    text = urllib.request.urlopen(f"{METRICS}/metrics", timeout=10).read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


@pytest.fixture
def installed(topo) -> Iterator[None]:
    if topo.name != "numa2":
        pytest.skip("the daemon's life cycle runs once, on numa2 (the Vagrant machine's shape), to keep CI's budget")
    provision("--only", "install")
    try:
        yield
    finally:
        subprocess.run(["bash", str(PROVISION), "--only", "stop"], capture_output=True, timeout=120)
        out = os.environ.get("HWAGENT_VM_OUT")
        if out and LOG.exists():  # the daemon's log comes back with the guest's artifacts
            shutil.copy(LOG, Path(out) / "hwagent.log")


def dedicated(uid: str, node: int, cpus: int = 2) -> pb.ResourceRequest:
    m = pb.ResourceRequest(pod_uid=uid, pod_namespace="ns", pod_name=uid, container_name="app",
                           container_type=pb.MAIN, resource_name="cpu", resource_requests={"cpu": cpus},
                           annotations={QOS_KEY: "dedicated_cores",
                                        MEMORY_ENHANCEMENT_KEY: json.dumps({"numa_binding": "true"})})
    m.hint.CopyFrom(pb.TopologyHint(nodes=[node], preferred=True))
    return m


async def call(fn_name: str, req) -> object:
    async with grpc.aio.insecure_channel(f"unix://{CPU_SOCKET}") as ch:
        return await getattr(pb_grpc.ResourcePluginStub(ch), fn_name)(req, timeout=60)


def allocations() -> dict[str, str]:
    resp = asyncio.run(call("GetResourcesAllocation", pb.GetResourcesAllocationRequest()))
    return {u: v.container_resources["app"].resource_allocation["cpu"].allocation_result
            for u, v in resp.pod_resources.items()}  # fmt: skip


# two daemon starts, each compiling the probes under TCG (~90 s on a loaded host), plus the install
@pytest.mark.timeout(900)
def test_start_serve_restart_stop(installed: None) -> None:
    topo = read_topology()
    far = [n for n in topo.numa_ids if topo.cpus_of_numa(n)][-1]

    # start, as the unit would: healthy, every component healthy, probes in BPF
    provision("--only", "start")
    first_pid = daemon_pid()
    assert first_pid is not None
    # the unit's ExecStart with the environment file's arguments, as systemd runs it
    argv = Path(f"/proc/{first_pid}/cmdline").read_bytes().split(b"\0")
    assert b"--config" in argv and b"/etc/hwagent/config.toml" in argv, argv
    assert urllib.request.urlopen(f"{METRICS}/healthz", timeout=10).status == 200
    m = scrape()
    unhealthy = [s.labels for s in m["hwagent_component_healthy"] if s.value != 1]
    assert not unhealthy, f"unhealthy components: {unhealthy}\n{log_tail()}"
    assert {s.labels["state"]: s.value for s in m["hwagent_topology_cpus"]}.get("online") == len(topo.online)
    assert m["hwagent_topology_numa_nodes"][0].value == len(topo.numa_ids)
    modes = {s.labels["probe"]: s.labels["mode"] for s in m["hwagent_pressure_probe_attached"]}
    assert modes.get("runqlat") == "bpf", f"run-queue probe not in BPF on the guest kernel: {modes}\n{log_tail()}"

    # serve: a NUMA-bound dedicated container over the CPU plugin's gRPC socket
    resp = asyncio.run(call("Allocate", dedicated("pod-d", far)))
    got = CPUSet.parse(resp.allocation_result.resource_allocation["cpu"].allocation_result)
    assert len(got) == 2 and got <= topo.cpus_of_numa(far)
    assert allocations() == {"pod-d": str(got)}

    # stop: clean exit, sockets and pid file gone
    provision("--only", "stop")
    assert daemon_pid() is None and not CPU_SOCKET.exists()
    assert "Traceback" not in LOG.read_text(), log_tail()

    # restart from the checkpoint: the same allocation, and its CPUs are not handed out again
    provision("--only", "start")
    assert daemon_pid() not in (None, first_pid)
    assert allocations() == {"pod-d": str(got)}
    room = max(topo.numa_ids, key=lambda n: len(topo.cpus_of_numa(n) - got))
    again = asyncio.run(call("Allocate", dedicated("pod-e", room, cpus=1)))
    other = CPUSet.parse(again.allocation_result.resource_allocation["cpu"].allocation_result)
    assert other and not other & got
    provision("--only", "stop")
    assert daemon_pid() is None and not CPU_SOCKET.exists()
