"""One real hwagent daemon per namespaced Slurm node, each with that node's view (issue 35).

Each daemon runs ``hwagent run`` (the venv's console script) inside its node's network
and UTS namespaces, entered through the node's slurmd (``nsenter --target``): it sees the
node's host name (so ``[slurm] node_name`` left empty names the right node, as slurmd's
own default does) and reaches slurmctld over the node's veth, as a daemon beside a real
slurmd would. Each has its own root dir, config, lock dir and log under the test's
directory, and offers its own device: one loop device per node over a sparse file on a
1 MiB tmpfs (``FailingDisk``), whose writes past the tmpfs capacity fail in the kernel,
the mechanism tests/integration/pressure/test_device_health.py uses to make a device
unhealthy for real. The block probe sees every loop device on the machine, but only the
daemon whose rule offers the failing one marks a device of its own unhealthy.

Only the parts the drain needs run: devices, the device-plugin host, pressure with the
block-I/O probe, the Slurm components and status; no CPU or memory policy, admission
or runtime, so three daemons on one machine claim no CPUs or cgroups of each other.
Everything is stopped (by pid) and removed on exit.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.integration.slurm.cluster import SlurmCluster

__all__ = ["FailingDisk", "NodeAgent", "failing_disk", "node_agents", "HWAGENT"]

HWAGENT = Path(sys.executable).parent / "hwagent"
RESOURCE = "example.com/scratch"


@dataclass(frozen=True)
class FailingDisk:
    """A loop device whose writes past 1 MiB fail (ENOSPC or EIO, by kernel)."""

    dev: str

    @property
    def name(self) -> str:
        return Path(self.dev).name

    def fail(self) -> None:
        """Write past the backing tmpfs's capacity: the kernel reports block request errors."""
        subprocess.run(["dd", "if=/dev/zero", f"of={self.dev}", "bs=64k", "count=64", "oflag=direct"],
                       capture_output=True, check=False, timeout=60)


@contextmanager
def failing_disk(base: Path) -> Iterator[FailingDisk]:
    mnt = base / "small"
    mnt.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    dev = None
    try:
        subprocess.run(["truncate", "-s", "8M", str(mnt / "disk.img")], check=True)
        dev = subprocess.run(["losetup", "-f", "--show", str(mnt / "disk.img")], check=True, capture_output=True,
                             text=True).stdout.strip()
        yield FailingDisk(dev)
    finally:
        if dev:
            subprocess.run(["losetup", "-d", dev], check=False)
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def agent_config(cluster: SlurmCluster, disk: FailingDisk, recovery_s: float, slurm: dict[str, str]) -> str:
    """The daemon's TOML: the node's one disk offered, block errors making it unhealthy at once and
    healthy again after ``recovery_s`` quiet seconds, [slurm] on with the test cluster's slurm.conf."""
    keys = {"enabled": "true", "slurm_conf": f'"{cluster.conf}"', **slurm}
    return (
        "[cpu]\nenabled = false\n[memory]\nenabled = false\n[workloads]\nenabled = false\n"
        "[runtime]\nenabled = false\n"
        "[pressure]\ninterval_s = 0.2\nwindow_s = 1.0\nrunqlat = false\nnetdev = false\niommu = false\n"
        "thermal = false\nirq = false\neviction_enabled = false\nerror_threshold = 1\nerror_window_s = 30\n"
        f"recovery_s = {recovery_s}\n"
        "[devices]\ndefault_rules = false\nhotplug = false\nregister_backoff_initial_s = 0.05\n"
        f'[[devices.resources]]\nname = "{RESOURCE}"\nblock_name = ["{disk.name}"]\n'
        "[slurm]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items())
    )


@dataclass
class NodeAgent:
    """One node's hwagent: its directory, config, root dir and process."""

    node: str
    base: Path
    disk: FailingDisk
    proc: subprocess.Popen
    argv: tuple[str, ...] = ()
    #: where the current run's log begins (a restart appends to the same file)
    log_start: int = 0

    @property
    def root(self) -> Path:
        return self.base / "root"

    @property
    def config(self) -> Path:
        return self.base / "hwagent.toml"

    def log(self) -> str:
        p = self.base / "stderr.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``hwagent <args> --root-dir <root>`` in this machine's namespaces (the sockets are files)."""
        return subprocess.run([str(HWAGENT), *args, "--root-dir", str(self.root)], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def wait_for(self, text: str, timeout: float = 90) -> None:
        """Until the log of this daemon's current run (since its last restart) holds ``text``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log()[self.log_start:]:
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"hwagent on {self.node} exited ({self.proc.returncode}):\n{self.log()[-3000:]}")
            time.sleep(0.1)
        raise AssertionError(f"no {text!r} from hwagent on {self.node} within {timeout}s:\n{self.log()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the daemon: nothing of it runs on, nothing of it is cleaned up."""
        self.proc.kill()
        self.proc.wait()

    def restart(self) -> None:
        """Start it again as before (after ``kill``), its log appended to the same file."""
        self.log_start = len(self.log())
        self.proc = _spawn(list(self.argv), self.base)

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start_agent(cluster: SlurmCluster, node: str, base: Path, disk: FailingDisk, recovery_s: float,
                slurm: dict[str, str]) -> NodeAgent:
    base.mkdir(parents=True)
    (base / "hwagent.toml").write_text(agent_config(cluster, disk, recovery_s, slurm))
    slurmd = cluster.procs[f"slurmd.{node}"]
    argv = ["nsenter", f"--target={slurmd.pid}", "--net", "--uts", "--",
            str(HWAGENT), "run", "--config", str(base / "hwagent.toml"), "--root-dir", str(base / "root"),
            "--metrics-address", "127.0.0.1:0", "--mode", "standalone", "--lock-dir", str(base / "locks")]
    return NodeAgent(node, base, disk, _spawn(argv, base), tuple(argv))


def _spawn(argv: list[str], base: Path) -> subprocess.Popen:
    with open(base / "stderr.log", "ab") as err:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                cwd=str(Path(__file__).resolve().parents[3]))


@contextmanager
def node_agents(cluster: SlurmCluster, base: Path, recovery_s: float = 3.0,
                slurm: dict[str, str] | None = None) -> Iterator[dict[str, NodeAgent]]:
    """An hwagent per node of ``cluster`` (each with its own failing disk), its probes attached; stopped after."""
    agents: dict[str, NodeAgent] = {}
    with ExitStack() as stack:
        try:
            for n in cluster.nodes:
                disk = stack.enter_context(failing_disk(base / n.name / "disk"))
                agents[n.name] = start_agent(cluster, n.name, base / n.name / "agent", disk, recovery_s,
                                             slurm or {})
            for a in agents.values():
                # the probes attach after READY (their compile is off the start path): errors before are unseen
                a.wait_for('msg="pressure ready"')
            yield agents
        finally:
            for a in agents.values():
                a.stop()
