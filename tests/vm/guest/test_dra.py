"""DRA claims in standalone mode on a real 2-NUMA kernel (numa2, issue 27), end to end.

What only the guest shows: the host has one NUMA node, so a claim's NUMA alignment cannot be
seen there. numa2 has a virtio-blk disk behind a PCIe expander bridge on each node (serial
``vmtest-n<node>``); a `hwagent run` daemon (single-numa-node) offers them through DRA only
(a rule with ``api = "dra"``). A dedicated NUMA-bound pod whose ResourceClaim asks for one disk
(``matchAttribute: hwagent.io/numaNode``) must get exactly one disk, on the node of its CPUs
(the kernel's ``numa_node`` of the disk's PCI function, the pod's ``Cpus_allowed_list``), open
it and get EPERM on the other node's disk; ``hwagent ps``/``describe`` and pod-resources name
the claim and the device. A second claim pinned by CEL to the other node's disk gives a pod
whose CPUs are on that other node: the topology manager aligned the CPUs with the claim.
Every budget is generous (TCG is slow); nothing asserts on timing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.commands.launch import ENHANCEMENT_KEY, QOS_KEY
from tests.cgroup_support import rmdir_cgroup_tree
from tests.vm.guest.test_workloads import (
    CGROUP_ROOT,
    HWAGENT,
    PROBE,
    START_BUDGET_S,
    STEP_BUDGET_S,
    Daemon,
    disk_nodes,
    node_cpus,
    parse_list,
    pci_numa_node_of_block,
    pod_resources,
    wait_for,
)
from tests.vm.topologies import GuestTopology

pytestmark = pytest.mark.timeout(1500)

DISK = "example.com/vdisk"
CLASS = "vdisk.example.com"
SUBTREE = "/hwagent-vmdra.slice"


class DraDaemon(Daemon):
    """The workloads test's daemon, with its disks offered through DRA instead of a device plugin."""

    def write_config(self) -> None:
        self.config.write_text(f"""
[daemon]
root_dir = "{self.root}"
mode = "standalone"
metrics_address = "127.0.0.1:0"

[pressure]
enabled = false

[topology_manager]
policy = "single-numa-node"

[devices]
default_rules = false

[[devices.resources]]
name = "{DISK}"
block_name = ["vd*"]
env = {{ GRANTED_DISKS = "{{block_devs}}" }}
api = "dra"

[dra]
cdi_dir = "{self.base / 'cdi'}"

[runtime]
cgroup_subtree = "{SUBTREE}"
cdi_spec_dirs = ["{self.base / 'cdi'}"]
# no managed_devices glob: the disks the DRA rule offers are managed by themselves (issue 32)
""")
        (self.root / "dra").mkdir(parents=True)
        write_atomic(self.root / "dra" / "class.yaml", yaml.safe_dump({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.attributes["hwagent.io"].resource == "{DISK}"'}}]}}))

    def start(self) -> None:
        self.starts += 1
        log = self.base / f"daemon-{self.starts}.log"
        self.logs.append(log)
        with open(log, "wb") as f:
            self.proc = subprocess.Popen([str(HWAGENT), "run", "--config", str(self.config)], stdout=f,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        wait_for(lambda: b"hwagent ready" in log.read_bytes(), "daemon ready", START_BUDGET_S, self)


def write_atomic(path: Path, text: str) -> None:
    """A claim file appears whole (hidden temp name: the claim reader skips it)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.rename(tmp, path)


def write_claim(d: Daemon, name: str, exactly: dict[str, Any], constraints: list[dict[str, Any]]) -> None:
    spec: dict[str, Any] = {"requests": [{"name": "one", "exactly": {"deviceClassName": CLASS, **exactly}}]}
    if constraints:
        spec["constraints"] = constraints
    write_atomic(d.root / "dra" / f"{name}.yaml", yaml.safe_dump({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"devices": spec}}))


def admit(d: Daemon, name: str, claim: str) -> Path:
    """A dedicated NUMA-bound pod (2 CPUs) whose one container uses ``claim``; its probe's output dir."""
    out = d.base / name
    out.mkdir()
    script = d.base / "probe.sh"
    script.write_text(PROBE)
    manifest = d.base / f"{name}.json"
    manifest.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default",
                     "annotations": {QOS_KEY: "dedicated_cores", ENHANCEMENT_KEY: json.dumps({"numa_binding": "true"})}},
        "spec": {"restartPolicy": "Never", "resourceClaims": [{"name": "disk", "resourceClaimName": claim}],
                 "containers": [{"name": "main", "command": ["/bin/sh", str(script), str(out)],
                                 "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"},
                                               "claims": [{"name": "disk"}]}}]}}))
    r = d.cli("admit", str(manifest))
    assert r.returncode == 0, f"admit {name}: rc {r.returncode}\n{r.stdout}\n{r.stderr}\n{d.log_tail()}"
    return out


def placed(d: Daemon, name: str, claim: str, out: Path) -> tuple[int, str, set[int]]:
    """(node, disk, cpus) of a running claim pod, after checking that every view agrees:
    ps, the kernel's numa_node of the disk, the workload's own status and what it could open,
    the claim file's allocation, describe and pod-resources."""

    def running() -> dict[str, Any] | None:
        pod = d.pod(name)
        assert pod["phase"] not in ("Failed", "Succeeded"), f"{name} ended: {pod}\n{d.log_tail()}"
        done = (out / "status").exists() and (out / "access").exists()
        return pod if pod["phase"] == "Running" and pod["containers"][0]["pid"] and done else None

    pod = wait_for(running, f"{name} Running with its probe's output", STEP_BUDGET_S, d)
    (c,) = pod["containers"]
    nodes = node_cpus()
    cpus = set(c["cpu_ids"])
    assert len(cpus) == 2, c
    (node,) = {n for n, cs in nodes.items() if cpus & cs}
    assert cpus <= nodes[node] and c["numa_affinity"] == [node] and c["mems"] == [node], c
    (dev,) = c["devices"]
    disk = dev["id"]
    assert dev["resource"] == f"resourceclaim/{claim}" and dev["numa_nodes"] == [node], c

    # the kernel's view of the disk: its PCI function's numa_node, and the node qemu put its bridge on
    assert pci_numa_node_of_block(disk) == node
    assert disk_nodes()[disk] == node

    # inside the workload: its CPUs, its memory node, the disk it was told of, what it could open
    status = dict(ln.split(":", 1) for ln in (out / "status").read_text().splitlines())
    assert parse_list(status["Cpus_allowed_list"]) == cpus, status
    assert parse_list(status["Mems_allowed_list"]) == {node}, status
    assert (out / "granted").read_text().split() == [disk]
    access = dict(ln.split(" ", 1) for ln in (out / "access").read_text().splitlines())
    assert access.pop(f"/dev/{disk}") == "ok", access
    assert access and all(v.startswith("denied") and "not permitted" in v for v in access.values()), access

    # the claim's file holds the allocation and the pod
    doc = yaml.safe_load((d.root / "dra" / f"{claim}.yaml").read_text())
    (res,) = doc["status"]["allocation"]["devices"]["results"]
    assert (res["device"], res["driver"], res["request"]) == (disk, "hwagent.io", "one"), doc
    assert [r["name"] for r in doc["status"]["reservedFor"]] == [name], doc

    # describe and pod-resources name the claim and its device
    r = d.cli("describe", name)
    assert r.returncode == 0 and f"resourceclaim/{claim}={disk}" in r.stdout and "CDI device: hwagent.io/claim=" \
        in r.stdout, r.stdout + r.stderr
    (p,) = [p for p in pod_resources(d).pod_resources if p.name == name]
    (dyn,) = p.containers[0].dynamic_resources
    assert (dyn.claim_name, dyn.claim_namespace) == (claim, "default")
    assert [(x.driver_name, x.device_name) for x in dyn.claim_resources] == [("hwagent.io", disk)]
    return node, disk, cpus


@pytest.fixture
def daemon(topo: GuestTopology, cgroup_layout: str) -> Iterator[Daemon]:
    if topo.name != "numa2":
        pytest.skip("the DRA proof runs once, on numa2 (2 nodes, a disk on each, cgroup v2)")
    if cgroup_layout != "v2":
        pytest.skip(f"needs cgroup v2 with cpuset, this guest has {cgroup_layout}")
    if sorted(disk_nodes().values()) != [0, 1]:
        pytest.fail(f"numa2 guest should have one virtio disk per node, got {disk_nodes()}")
    d = DraDaemon(Path(tempfile.mkdtemp(prefix="hwvmdra", dir="/tmp")))  # short: AF_UNIX paths
    d.write_config()
    d.start()
    try:
        yield d
    finally:
        try:
            if d.proc is not None:
                for pod in d.ps():
                    d.cli("rm", pod["name"])
                d.stop()
        finally:
            if d.proc is not None:
                d.proc.kill()
            base = CGROUP_ROOT / SUBTREE.lstrip("/")
            if base.exists():
                try:
                    (base / "cgroup.kill").write_text("1")
                except OSError:
                    pass
                rmdir_cgroup_tree(base, tries=100, pause_s=0.05)
            out = os.environ.get("HWAGENT_VM_OUT")
            if out:  # the daemon's logs come back with the guest's artifacts
                for log in d.logs:
                    shutil.copy(log, Path(out) / f"dra-{log.name}")
            shutil.rmtree(d.base, ignore_errors=True)


def test_claim_gets_the_disk_on_its_cpus_node_and_a_cel_pin_moves_the_cpus(daemon: Daemon) -> None:
    # one disk, whichever node: the pod's CPUs and its disk must share a node
    write_claim(daemon, "disk-a", {"allocationMode": "ExactCount", "count": 1},
                [{"matchAttribute": "hwagent.io/numaNode"}])
    node_a, disk_a, cpus_a = placed(daemon, "dra-a", "disk-a", admit(daemon, "dra-a", "disk-a"))

    # the other node's disk, pinned by CEL: the topology manager must put the CPUs there, though
    # pod A's node still has room for them (single-numa-node would take that node first otherwise)
    other = 1 - node_a
    assert len(node_cpus()[node_a] - cpus_a) >= 2, (node_a, cpus_a)
    write_claim(daemon, "disk-b", {"selectors": [
        {"cel": {"expression": f'device.attributes["hwagent.io"].numaNode == {other}'}}]}, [])
    node_b, disk_b, cpus_b = placed(daemon, "dra-b", "disk-b", admit(daemon, "dra-b", "disk-b"))
    print(f"dra-a: {disk_a} cpus {sorted(cpus_a)} node {node_a}; dra-b: {disk_b} cpus {sorted(cpus_b)} node {node_b}")
    assert node_b == other and disk_b != disk_a and not cpus_a & cpus_b
