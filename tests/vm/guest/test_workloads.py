"""Standalone admission and the workload runtime end to end on a real 2-NUMA kernel: a
`hwagent run` daemon with `single-numa-node`, its virtio-blk plugin, and the CLI as a user
runs it, from other processes.

Why only the guest shows it: the host has one NUMA node and no cgroup v2 controllers. On
numa2 (two nodes, a virtio-blk disk behind a PCIe expander bridge on each, cgroup v2 with
cpuset) a dedicated NUMA-bound pod with one disk must get its CPUs, its memory node and its
disk on one node, seen from inside the workload, in `hwagent ps`, in pod-resources and in
its cgroup; an impossible request is refused and changes nothing; restarts of the daemon
(SIGTERM and kill -9) keep every admission and the running process; `hwagent stop` ends the
workload and gives its CPUs and disk back.

The tests run in order on one daemon (module fixture): each step starts from the state the
previous one proved. Every budget is generous (TCG is slow); nothing asserts on timing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.cgroup_support import rmdir_cgroup_tree
from tests.vm.topologies import GuestTopology

#: each step is minutes under TCG (a daemon start, a BPF device program compiled per pod)
pytestmark = pytest.mark.timeout(1200)

DISK = "example.com/vdisk"
SUBTREE = "/hwagent-vmtest.slice"
CGROUP_ROOT = Path("/sys/fs/cgroup")
HWAGENT = Path(sys.executable).parent / "hwagent"
#: TCG runs Python a few times slower than the host, under a loaded host; a v2 device
#: program (bcc) compiles per pod before it starts: ~100 s under TCG here
START_BUDGET_S = 300.0
STEP_BUDGET_S = 420.0
CLI_TIMEOUT_S = 300.0


def _missing_feature() -> str | None:
    """Why this branch cannot run the proof (admission or runtime not merged), or None."""
    for mod, what in (("agent.workloads.server", "standalone admission (agent/workloads)"),
                      ("agent.topologymanager", "the topology manager (agent/topologymanager)"),
                      ("agent.runtime.runtime", "the workload runtime (agent/runtime)")):
        if _find(mod) is None:
            return f"{what} is not on this branch"
    from agent.cli import COMMANDS

    needed = [c for c in ("launch", "ps", "stop", "rm", "logs") if f"agent.commands.{c}" not in COMMANDS]
    if needed:
        return f"CLI commands missing on this branch: hwagent {', '.join(needed)}"
    if not HWAGENT.exists():
        return f"no hwagent console script at {HWAGENT}"
    return None


def _find(mod: str) -> Any:
    try:
        return importlib.util.find_spec(mod)
    except ModuleNotFoundError:
        return None


def wait_for(cond: Callable[[], Any], what: str, budget: float = STEP_BUDGET_S, daemon: Daemon | None = None) -> Any:
    deadline = time.monotonic() + budget
    while True:
        got = cond()
        if got:
            return got
        if daemon is not None and daemon.proc is not None and daemon.proc.poll() is not None:
            raise AssertionError(f"daemon exited ({daemon.proc.returncode}) while waiting for {what}\n{daemon.log_tail()}")
        if time.monotonic() > deadline:
            tail = daemon.log_tail() if daemon is not None else ""
            raise AssertionError(f"{what}: not within {budget:.0f}s\n{tail}")
        time.sleep(0.2)


# -- what the kernel says, independently of hwagent --------------------------------------
def disk_nodes() -> dict[str, int]:
    """Disk name -> the node qemu put its bridge on (from the serial vmtest-n<node>)."""
    return {p.name: int(p.joinpath("serial").read_text().strip().rsplit("n", 1)[1])
            for p in Path("/sys/block").glob("vd*") if p.joinpath("serial").exists()}


def pci_numa_node_of_block(name: str) -> int:
    """numa_node of the PCI function behind /sys/block/NAME (walk up to the PCI device)."""
    p = Path("/sys/block", name).resolve()
    while p != p.parent:
        sub = p / "subsystem"
        if sub.exists() and sub.resolve().name == "pci" and (p / "numa_node").exists():
            return int((p / "numa_node").read_text())
        p = p.parent
    raise AssertionError(f"no PCI device above /sys/block/{name}")


def node_cpus() -> dict[int, set[int]]:
    out = {}
    for d in Path("/sys/devices/system/node").glob("node[0-9]*"):
        out[int(d.name[4:])] = parse_list(d.joinpath("cpulist").read_text())
    return out


def parse_list(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def proc_status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (ln.partition(":") for ln in lines)}


# -- the daemon and the CLI, as separate processes ---------------------------------------
@dataclass
class Daemon:
    base: Path
    proc: subprocess.Popen | None = None
    starts: int = 0
    logs: list[Path] = field(default_factory=list)

    @property
    def root(self) -> Path:
        return self.base / "root"

    @property
    def config(self) -> Path:
        return self.base / "hwagent.toml"

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

[runtime]
cgroup_subtree = "{SUBTREE}"
# every virtio disk is hwagent's to hand out: one not granted must be unreachable
managed_devices = ["/dev/vd*"]
""")

    def start(self) -> None:
        self.starts += 1
        log = self.base / f"daemon-{self.starts}.log"
        self.logs.append(log)
        with open(log, "wb") as f:
            self.proc = subprocess.Popen([str(HWAGENT), "run", "--config", str(self.config)], stdout=f,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        wait_for(lambda: b"hwagent ready" in log.read_bytes(), "daemon ready", START_BUDGET_S, self)
        # the disk plugin registered both disks with the host
        wait_for(lambda: len(allocatable_disks(self)) == len(disk_nodes()), "both disks allocatable",
                 START_BUDGET_S, self)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        rc = self.proc.wait(STEP_BUDGET_S)
        self.proc = None
        return rc

    def log_tail(self, n: int = 40) -> str:
        if not self.logs:
            return "(no daemon log)"
        text = self.logs[-1].read_text(errors="replace").splitlines()
        return f"--- {self.logs[-1].name} ---\n" + "\n".join(text[-n:])

    def cli(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(HWAGENT), argv[0], "--root-dir", str(self.root), *argv[1:]],
                              capture_output=True, text=True, timeout=CLI_TIMEOUT_S)

    def ps(self) -> list[dict[str, Any]]:
        p = self.cli("ps", "--format", "json")
        assert p.returncode == 0, f"hwagent ps: rc {p.returncode}\n{p.stderr}"
        return json.loads(p.stdout)["pods"]

    def pod(self, name: str) -> dict[str, Any]:
        (pod,) = [p for p in self.ps() if p["name"] == name]
        return pod


def pod_resources(d: Daemon, method: str = "List") -> Any:
    import grpc

    from agent.api.podresources.v1 import api_pb2 as pr
    from agent.api.podresources.v1 import api_pb2_grpc as pr_grpc

    req = {"List": pr.ListPodResourcesRequest, "GetAllocatableResources": pr.AllocatableResourcesRequest}[method]()
    with grpc.insecure_channel(f"unix://{d.root / 'pod-resources' / 'pod-resources.sock'}") as ch:
        return getattr(pr_grpc.PodResourcesListerStub(ch), method)(req, timeout=60)


def allocatable_disks(d: Daemon) -> dict[str, list[int]]:
    sock = d.root / "pod-resources" / "pod-resources.sock"
    if not sock.is_socket():
        return {}
    try:
        alloc = pod_resources(d, "GetAllocatableResources")
    except Exception:  # not serving yet
        return {}
    return {i: [n.ID for n in x.topology.nodes] for x in alloc.devices if x.resource_name == DISK for i in x.device_ids}


def listed(d: Daemon) -> dict[str, tuple[list[int], list[tuple[str, tuple[str, ...], tuple[int, ...]]]]]:
    """pod-resources List as pod name -> (cpu ids, [(resource, ids, numa nodes)]) of its one container."""
    out = {}
    for p in pod_resources(d).pod_resources:
        (c,) = p.containers
        out[p.name] = (sorted(c.cpu_ids), [(x.resource_name, tuple(x.device_ids), tuple(n.ID for n in x.topology.nodes))
                                          for x in c.devices])
    return out


# -- the workload -----------------------------------------------------------------------
#: records where it runs, what it can open, then sleeps; the test reads the files
PROBE = r"""
set -u
out="$1"
grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status > "$out/status.tmp" && mv "$out/status.tmp" "$out/status"
cat /proc/self/cgroup > "$out/cgroup"
echo "$GRANTED_DISKS" > "$out/granted"
for d in /dev/vd?; do
    if head -c 512 "$d" > /dev/null 2> "$out/err"; then echo "$d ok"; else echo "$d denied $(cat "$out/err")"; fi
done > "$out/access.tmp" && mv "$out/access.tmp" "$out/access"
exec sleep 100000
"""


@dataclass
class Launched:
    name: str
    out: Path
    pid: int
    cpus: set[int]
    node: int
    disk: str


def launch(d: Daemon, name: str, out: Path, cpus: int = 2) -> subprocess.CompletedProcess:
    out.mkdir(parents=True, exist_ok=True)
    script = out.parent / "probe.sh"
    script.write_text(PROBE)
    return d.cli("launch", "--name", name, "--cpus", str(cpus), "--qos", "dedicated", "--numa-binding",
                 "--device", f"{DISK}=1", "--", "sh", str(script), str(out))


def running(d: Daemon, name: str) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        pod = d.pod(name)
        assert pod["phase"] not in ("Failed", "Succeeded"), f"{name} ended: {pod}\n{d.log_tail()}"
        c = pod["containers"][0]
        return pod if pod["phase"] == "Running" and c["pid"] else None

    return wait_for(ready, f"{name} Running", STEP_BUDGET_S, d)


def cgroup_dir_of(out: Path) -> Path:
    (line,) = [ln for ln in (out / "cgroup").read_text().splitlines() if ln.startswith("0::")]
    return CGROUP_ROOT / line[3:].lstrip("/")


def check_placement(d: Daemon, name: str, out: Path) -> Launched:
    """Everything that must agree for a dedicated NUMA-bound pod with one disk."""
    pod = running(d, name)
    (c,) = pod["containers"]
    wait_for(lambda: (out / "status").exists() and (out / "access").exists(), f"{name} probe output", STEP_BUDGET_S, d)
    nodes = node_cpus()

    # hwagent ps: two CPUs on one node, the disk on that node, mems = that node
    cpus = set(c["cpu_ids"])
    assert len(cpus) == 2, c
    (node,) = {n for n, cs in nodes.items() if cpus & cs}
    assert cpus <= nodes[node]
    (dev,) = c["devices"]
    assert dev["resource"] == DISK and dev["numa_nodes"] == [node], c
    disk = dev["id"]
    assert c["numa_affinity"] == [node] and c["mems"] == [node], c

    # the kernel's own view of that disk: its PCI function's numa_node, and what qemu was told
    assert pci_numa_node_of_block(disk) == node
    assert disk_nodes()[disk] == node

    # inside the workload: what it was allowed, which disk it was told about, what it could open
    status = dict(ln.split(":", 1) for ln in (out / "status").read_text().splitlines())
    assert parse_list(status["Cpus_allowed_list"]) == cpus, status
    assert parse_list(status["Mems_allowed_list"]) == {node}, status
    assert (out / "granted").read_text().split() == [disk]
    access = dict(ln.split(" ", 1) for ln in (out / "access").read_text().splitlines())
    assert access.pop(f"/dev/{disk}") == "ok", access
    assert access and all(v.startswith("denied") and "not permitted" in v for v in access.values()), access

    # its cgroup v2: under the runtime's subtree, holding the process, with the same cpuset
    cg = cgroup_dir_of(out)
    assert str(cg).startswith(str(CGROUP_ROOT / SUBTREE.lstrip("/")) + "/"), cg
    assert str(c["pid"]) in (cg / "cgroup.procs").read_text().split()
    assert parse_list((cg / "cpuset.cpus").read_text()) == cpus
    assert parse_list((cg / "cpuset.mems").read_text()) == {node}
    assert parse_list((cg / "cpuset.cpus.effective").read_text()) == cpus

    # pod-resources v1 List reports the same CPUs and the same disk with its topology
    cpu_ids, devices = listed(d)[name]
    assert set(cpu_ids) == cpus
    assert devices == [(DISK, (disk,), (node,))]
    return Launched(name, out, c["pid"], cpus, node, disk)


# -- fixtures ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def daemon(topo: GuestTopology, cgroup_layout: str) -> Iterator[Daemon]:
    if topo.name != "numa2":
        pytest.skip("the admission + runtime proof runs once, on numa2 (2 nodes, a disk on each, cgroup v2)")
    if cgroup_layout != "v2":
        pytest.skip(f"needs cgroup v2 with cpuset, this guest has {cgroup_layout}")
    missing = _missing_feature()
    if missing:
        pytest.skip(missing)
    if sorted(disk_nodes().values()) != [0, 1]:
        pytest.fail(f"numa2 guest should have one virtio disk per node, got {disk_nodes()}")
    d = Daemon(Path(tempfile.mkdtemp(prefix="hwvmwl", dir="/tmp")))  # short: AF_UNIX paths
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
            _kill_subtree()
            out = os.environ.get("HWAGENT_VM_OUT")
            if out:  # the daemon's logs come back with the guest's artifacts
                for log in d.logs:
                    shutil.copy(log, Path(out) / f"workloads-{log.name}")
            shutil.rmtree(d.base, ignore_errors=True)


def _kill_subtree() -> None:
    base = CGROUP_ROOT / SUBTREE.lstrip("/")
    if not base.exists():
        return
    try:
        (base / "cgroup.kill").write_text("1")
    except OSError:
        pass
    rmdir_cgroup_tree(base, tries=100, pause_s=0.05)


@dataclass
class Story:
    """What the earlier steps established, for the later ones."""

    first: Launched | None = None
    refused_ok: bool = False
    restarted_ok: bool = False


@pytest.fixture(scope="module")
def story() -> Story:
    return Story()


def _need(value: Any, step: str) -> Any:
    if not value:
        pytest.fail(f"an earlier step ({step}) failed; this one starts from its state")
    return value


# -- the proof, in order ----------------------------------------------------------------
def test_dedicated_numa_bound_pod_gets_cpus_memory_and_disk_on_one_node(daemon: Daemon, story: Story) -> None:
    out = daemon.base / "first"
    p = launch(daemon, "first", out)
    assert p.returncode == 0, f"launch: rc {p.returncode}\n{p.stderr}\n{daemon.log_tail()}"
    assert p.stdout.startswith("admitted default/first"), p.stdout
    story.first = check_placement(daemon, "first", out)


def test_impossible_request_is_refused_and_changes_nothing(daemon: Daemon, story: Story) -> None:
    _need(story.first, "the first launch")
    nodes = node_cpus()
    most = max(len(cs) for cs in nodes.values())
    ps_before, pr_before = daemon.ps(), listed(daemon)
    # more dedicated CPUs than any one node has: single-numa-node cannot place it
    p = launch(daemon, "toobig", daemon.base / "toobig", cpus=most + 1)
    assert p.returncode == 1, f"rc {p.returncode}\n{p.stdout}\n{p.stderr}"
    err = p.stderr.strip()
    # one line naming the resource and what each node had free
    assert "RESOURCE_EXHAUSTED" not in err and "cpu" in err and len(err.splitlines()) == 1, err
    free = {n: len(cs - story.first.cpus) for n, cs in nodes.items()}
    # each node's free CPUs, then the devices the pod asked for (", N example.com/vdisk")
    assert "free per NUMA node: " in err, err
    line = err.split("free per NUMA node: ", 1)[1]
    for n in sorted(free):
        assert re.search(rf"(^|; )node {n}: {free[n]} CPUs?(,|;|$)", line), (n, free[n], err)
    assert daemon.ps() == ps_before
    assert listed(daemon) == pr_before
    assert not (daemon.base / "toobig" / "status").exists()
    story.refused_ok = True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_daemon_restart_keeps_admissions_and_the_running_workload(daemon: Daemon, story: Story, sig: int) -> None:
    first: Launched = _need(story.first, "the first launch")
    ps_before, pr_before = daemon.ps(), listed(daemon)
    rc = daemon.stop(sig)
    assert rc == (0 if sig == signal.SIGTERM else -signal.SIGKILL), f"daemon rc {rc}\n{daemon.log_tail()}"
    # while the daemon is down the workload runs on, where it was put
    assert parse_list(proc_status(first.pid)["Cpus_allowed_list"]) == first.cpus
    daemon.start()
    pod = running(daemon, "first")
    assert pod["containers"][0]["pid"] == first.pid, pod
    keep = ("uid", "qos", "phase")
    assert [{k: p[k] for k in keep} | {"c": [(c["cpu_ids"], c["devices"], c["mems"]) for c in p["containers"]]}
            for p in daemon.ps()] == [
        {k: p[k] for k in keep} | {"c": [(c["cpu_ids"], c["devices"], c["mems"]) for c in p["containers"]]}
        for p in ps_before]
    assert listed(daemon) == pr_before
    st = proc_status(first.pid)
    assert parse_list(st["Cpus_allowed_list"]) == first.cpus and parse_list(st["Mems_allowed_list"]) == {first.node}
    story.restarted_ok = story.restarted_ok or sig == signal.SIGKILL


def test_restarted_daemon_hands_out_nothing_twice_and_stop_releases(daemon: Daemon, story: Story) -> None:
    first: Launched = _need(story.first, "the first launch")
    _need(story.restarted_ok, "the restarts")
    # a second pod after the restarts: the first node's disk is taken, so it lands on the other node
    out2 = daemon.base / "second"
    p = launch(daemon, "second", out2)
    assert p.returncode == 0, f"launch: rc {p.returncode}\n{p.stderr}\n{daemon.log_tail()}"
    second = check_placement(daemon, "second", out2)
    assert second.node != first.node and second.disk != first.disk and not second.cpus & first.cpus

    # stop: the process ends, its cgroup goes, pod-resources no longer holds its CPUs or disk
    cg = cgroup_dir_of(first.out)
    p = daemon.cli("stop", "first")
    assert p.returncode == 0, f"stop: rc {p.returncode}\n{p.stderr}\n{daemon.log_tail()}"
    pod = wait_for(lambda: (lambda q: q if q["released"] else None)(daemon.pod("first")), "first released",
                   STEP_BUDGET_S, daemon)
    assert pod["phase"] in ("Failed", "Succeeded") and pod["reason"] == "Stopped", pod
    assert not Path(f"/proc/{first.pid}").exists()
    assert not cg.exists() and not cg.parent.exists(), f"cgroup left behind: {cg}"
    assert set(listed(daemon)) == {"second"}

    # freed for real: the same request, asked as a dry run, now fits only the first pod's node,
    # where every CPU and the disk are free again (no third process: a launch costs minutes here)
    manifest = daemon.base / "again.yaml"
    manifest.write_text(
        "metadata: {name: again, annotations: {katalyst.kubewharf.io/qos_level: dedicated_cores, "
        "katalyst.kubewharf.io/memory_enhancement: '{\"numa_binding\": \"true\"}'}}\n"
        f"spec: {{containers: [{{name: main, command: [sleep, '1'], resources: {{limits: {{cpu: 2, {DISK}: 1}}}}}}]}}\n"
    )
    p = daemon.cli("admit", "--dry-run", "--format", "json", str(manifest))
    assert p.returncode == 0, f"admit --dry-run: rc {p.returncode}\n{p.stdout}\n{p.stderr}"
    decision = json.loads(p.stdout)
    assert decision["would_admit"] and [c["numa_nodes"] for c in decision["containers"]] == [[first.node]], decision
    nodes = node_cpus()
    free_cpus = {n: len(nodes[n] - (second.cpus if n == second.node else set())) for n in sorted(nodes)}
    expected = "; ".join(f"node {n}: {k} CPU{'' if k == 1 else 's'}, {0 if n == second.node else 1} {DISK}"
                         for n, k in free_cpus.items())
    assert f"free per NUMA node: {expected}" in decision["free"], decision["free"]
    assert [p["name"] for p in daemon.ps()] == ["first", "second"]  # a dry run admits nothing

    for name, pod_out in (("second", out2),):
        pid = daemon.pod(name)["containers"][0]["pid"]
        cg = cgroup_dir_of(pod_out)
        p = daemon.cli("stop", name)
        assert p.returncode == 0, f"stop {name}: rc {p.returncode}\n{p.stderr}"
        wait_for(lambda n=name: daemon.pod(n)["released"], f"{name} released", STEP_BUDGET_S, daemon)
        assert not Path(f"/proc/{pid}").exists() and not cg.parent.exists()
    assert listed(daemon) == {}
    # nothing of the pods' is left in the runtime's subtree
    base = CGROUP_ROOT / SUBTREE.lstrip("/")
    left = [p.name for p in base.iterdir() if p.is_dir()] if base.exists() else []
    assert left == [], f"left in {base}: {left}"
