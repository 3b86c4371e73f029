"""The world of the NRI placement tests: a private containerd 1.7 (NRI on), the real hwagent
daemon (CPU policy, memory manager, standalone admission for its dry runs, the NRI component,
status) as its own process, and a CRI client that creates pods as the kubelet would (cgroup
parents of the kubelet's shape under a test-owned subtree, CPU shares/quota and memory limit
of the pod's class). Every read-back is the kernel's: the container's cgroup files and
``/proc/<pid>/status``."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.api.cri.v1 import api_pb2 as cri_pb
from agent.cpuset import CPUSet
from tests.cgroup_support import rmdir_cgroup_tree
from tests.integration.daemon.test_lifecycle import Daemon
from tests.integration.nri.containerd import Containerd
from tests.integration.nri.cri import CriClient, Pod
from tests.integration.nri.image import IMAGE, build_pause_archive

__all__ = ["World", "world_of", "readback", "wait_for"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
HWAGENT = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "hwagent"
COMPONENTS = ("agent.cpu.component:create", "agent.memory.component:create", "agent.workloads.component:factory",
              "agent.nri.component:factory", "agent.status.component:factory")
KATALYST = "katalyst.kubewharf.io/qos_level"
NUMA_BINDING = {"katalyst.kubewharf.io/memory_enhancement": '{"numa_binding": "true"}'}


def wait_for(what: str, check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def _controller_path(pid: int, controller: str) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    raise AssertionError(f"process {pid} has no {controller} cgroup (cgroup v1 expected here)")


def readback(pid: int) -> dict[str, Any]:
    """What the kernel says of a container's process: its cpuset cgroup's cpus/mems, its cpu
    cgroup's shares, and the affinity in /proc/<pid>/status."""
    status = dict(ln.split(":\t", 1) for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in ln)
    cs = CGROUP_ROOT / "cpuset" / _controller_path(pid, "cpuset").lstrip("/")
    cpu = CGROUP_ROOT / "cpu" / _controller_path(pid, "cpu").lstrip("/")
    return {
        "cgroup_cpus": CPUSet.parse((cs / "cpuset.cpus").read_text().strip()),
        "cgroup_mems": CPUSet.parse((cs / "cpuset.mems").read_text().strip()),
        "cpus_allowed": CPUSet.parse(status["Cpus_allowed_list"].strip()),
        "mems_allowed": CPUSet.parse(status["Mems_allowed_list"].strip()),
        "shares": int((cpu / "cpu.shares").read_text()),
    }


@dataclass
class World:
    base: Path
    containerd: Containerd
    cri: CriClient
    parent: str
    daemons: list[Daemon] = field(default_factory=list)
    #: the logs of daemons killed before (a restarted daemon writes the same stderr file again)
    old_logs: list[str] = field(default_factory=list)

    # -- hwagent ---------------------------------------------------------------------------
    @property
    def root(self) -> Path:
        return self.base / "hw" / "root"

    def config(self) -> Path:
        cfg = self.base / "hwagent.toml"
        cfg.write_text(f"""
[daemon]
# no kubelet here: the test's own (absent) dir, whatever this machine's /var/lib/kubelet holds
kubelet_root_dir = "{self.base}/kubelet"

[nri]
enabled = true
socket_path = "{self.containerd.nri_socket}"
reconnect_interval_s = 0.2

[cpu]
# the runtime applies what hwagent answers: the policy's own writer stays out of the test's cgroups
enforce_cgroups = false
sync_cpu_idle = false
transition_period_s = 1
cpuset_check_interval_s = 0.5

[devices]
enabled = false

[pressure]
enabled = false

[runtime]
enabled = false

[workloads]
socket_group = ""
""")
        return cfg

    def start_hwagent(self) -> Daemon:
        d = Daemon(self.base / "hw", "--config", str(self.config()), components=COMPONENTS)
        self.daemons.append(d)
        wait_for("hwagent registered with containerd", lambda: self.nri_state(d).get("registered"), 60)
        return d

    def kill_hwagent(self, d: Daemon) -> None:
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(10)
        self.old_logs.append(d.log())

    def hw(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        p = subprocess.run([str(HWAGENT), *args, "--root-dir", str(self.root)], capture_output=True, text=True,
                           timeout=60)
        if check and p.returncode not in (0, 1):
            raise AssertionError(f"hwagent {' '.join(args)}: {p.returncode} {p.stderr}")
        return p

    def status_detail(self) -> str:
        doc = json.loads(self.hw("status", "--format", "json").stdout)
        return next(c["detail"] for c in doc["components"] if c["name"] == "nri")

    def nri_state(self, d: Daemon) -> dict[str, Any]:
        """Whether the plugin is registered and synchronized in its current session (its log)."""
        if d.proc.poll() is not None:
            raise AssertionError(f"hwagent exited ({d.proc.returncode}):\n{d.log()[-3000:]}")
        return {"registered": 'msg="nri synchronized"' in d.log().rsplit('msg="nri disconnected"', 1)[-1]}

    def metric(self, d: Daemon, series: str) -> float:
        """One series' value on the daemon's /metrics (0 when absent)."""
        url = re.findall(r'msg="metrics endpoint listening".* url=(\S+)', d.log())[-1].strip('"')
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
            text = r.read().decode()
        for line in text.splitlines():
            if line.startswith(series + " "):
                return float(line.split()[-1])
        return 0.0

    def kill_containerd(self) -> None:
        """SIGKILL, as a crash: its shims and containers keep running; a new start serves them again."""
        ctd = self.containerd
        assert ctd.proc is not None
        ctd.proc.kill()
        ctd.proc.wait(10)
        ctd.nri_socket.unlink(missing_ok=True)  # left behind by the kill: the next start makes a new one

    def synchronized(self, d: Daemon) -> list[dict[str, str]]:
        """The fields of every 'nri synchronized' line the daemon logged."""
        return [_fields(ln) for ln in d.log().splitlines() if 'msg="nri synchronized"' in ln]

    def dry_run(self, name: str, level: str, cpu: str | None, memory: str | None = None,
                annotations: dict[str, str] | None = None) -> tuple[CPUSet, CPUSet | None]:
        """Standalone admission's dry run of the equivalent pod manifest: (cpus, mems)."""
        limits = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
        m = {"metadata": {"name": f"dry-{name}", "annotations": {KATALYST: level, **(annotations or {})}},
             "spec": {"containers": [{"name": "main", "command": ["sleep", "1"],
                                      "resources": {"limits": limits} if limits else {}}]}}
        f = self.base / f"dry-{name}.json"
        f.write_text(json.dumps(m))
        p = self.hw("admit", "--dry-run", "--format", "json", str(f))
        doc = json.loads(p.stdout)
        assert doc["would_admit"], doc
        c = doc["containers"][0]
        return CPUSet(c["cpu_ids"]), (CPUSet(c["mems"]) if c["mems"] else None)

    def allocations(self) -> dict[str, tuple[str, CPUSet]]:
        """pod uid -> (QoS level, CPUs) of every container the live CPU policy holds."""
        doc = json.loads(self.hw("cpus", "--format", "json").stdout)
        assert doc["source"] == "cpu policy (live)", doc["source"]
        return {a["pod_uid"]: (a["qos_level"], CPUSet.parse(a["cpus"])) for a in doc["allocations"]}

    def decide_ms(self) -> list[tuple[float, float]]:
        """(wall ms, loop-thread CPU ms) of every CreateContainer decision the daemons logged."""
        logs = self.old_logs + [d.log() for d in self.daemons if d.proc.poll() is None]
        pat = r'msg="nri create container".* decide_ms=([0-9.]+) decide_cpu_ms=([0-9.]+)'
        return [(float(a), float(b)) for log in logs for a, b in re.findall(pat, log)]

    def cpu_seconds(self) -> dict[str, float]:
        """utime+stime so far of the running hwagent and containerd processes."""
        tick = os.sysconf("SC_CLK_TCK")
        out: dict[str, float] = {}
        procs = {"hwagent": next((d.proc for d in reversed(self.daemons) if d.proc.poll() is None), None),
                 "containerd": self.containerd.proc}
        for name, proc in procs.items():
            if proc is not None and proc.poll() is None:
                fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
                out[name] = (int(fields[11]) + int(fields[12])) / tick
        return out

    # -- pods --------------------------------------------------------------------------------
    def pod_parent(self, kube_qos: str, uid: str) -> str:
        mid = {"Guaranteed": "", "Burstable": "/burstable", "BestEffort": "/besteffort"}[kube_qos]
        return f"{self.parent}/kubepods{mid}/pod{uid}"

    def run(self, name: str, kube_qos: str, *, milli: int = 0, memory: int = 64 << 20,
            annotations: dict[str, str] | None = None) -> tuple[Pod, str, int]:
        """A pod of one container as the kubelet asks for it; (pod, container id, pid)."""
        uid = f"{name}-{uuid.uuid4().hex[:6]}"
        pod = self.cri.run_pod(name, "default", uid, cgroup_parent=self.pod_parent(kube_qos, uid),
                               log_dir=self.base / "logs", annotations=annotations)
        shares = max(2, milli * 1024 // 1000)
        quota = milli * 100 if kube_qos == "Guaranteed" else 0
        config = cri_pb.ContainerConfig(
            metadata=cri_pb.ContainerMetadata(name="main", attempt=0), image=cri_pb.ImageSpec(image=IMAGE),
            log_path=f"{name}.log", annotations=annotations or {},
            linux=cri_pb.LinuxContainerConfig(resources=cri_pb.LinuxContainerResources(
                cpu_shares=shares, cpu_quota=quota, cpu_period=100_000 if quota else 0,
                memory_limit_in_bytes=memory if kube_qos != "BestEffort" else 0)))
        cid = self.cri._rt.CreateContainer(cri_pb.CreateContainerRequest(  # noqa: SLF001 - no quota in the helper
            pod_sandbox_id=pod.id, config=config, sandbox_config=pod.config), timeout=self.cri.timeout).container_id
        self.cri.start_container(cid)
        return pod, cid, self.cri.container_pid(cid)


_KV = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def _fields(line: str) -> dict[str, str]:
    """A logfmt line's fields."""
    return {k: v.strip('"') for k, v in _KV.findall(line)}


@contextmanager
def world_of(prefix: str) -> Iterator[World]:
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    ctd = Containerd(base)
    parent = f"/hwagent-nri-core-{uuid.uuid4().hex[:8]}"
    cri: CriClient | None = None
    w: World | None = None
    try:
        archive = build_pause_archive(base)
        ctd.start()
        ctd.ctr("images", "import", str(archive))
        cri = CriClient(ctd.cri_socket)
        w = World(base, ctd, cri, parent)
        yield w
    finally:
        if cri is not None:
            try:
                for pod_id in cri.pod_ids():
                    cri.remove_pod(pod_id)
            finally:
                cri.close()
        if w is not None:
            for d in w.daemons:
                d.cleanup()
        ctd.stop()
        for d in [CGROUP_ROOT, *CGROUP_ROOT.iterdir()]:
            p = d / parent.lstrip("/")
            if d.is_dir() and p.is_dir():
                rmdir_cgroup_tree(p)
        shutil.rmtree(base, ignore_errors=True)
