"""A real Slurm cluster on this machine for tests: munged, slurmctld and slurmds (Debian's slurm-wlm).

Everything lives under one test-owned directory: the munge key and socket, the
configuration (slurm.conf and gres.conf side by side, where slurmd looks for
gres.conf), state, spool, logs and pid files. Ports are chosen free; the daemons
run as root (``SlurmUser=root``), with no cgroup plugins (``proctrack/linuxproc``,
``task/none``) unless asked: then proctrack/cgroup and task/cgroup in a test-owned
subtree (tests/integration/slurm/cgroups.py), so the tests make no cgroups outside their own. Each daemon
is started in the foreground as our child and stopped by its pid on exit, so
nothing of the packages' system services (stopped by scripts/setup.sh) is used
or disturbed. One node runs on this host's loopback (``slurm_cluster``); several
run each in its own network and UTS namespace on a test bridge
(``multi_node_cluster``, tests/integration/slurm/netns.py), which the later parts
of issue 35 build on.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.integration.slurm.cgroups import SlurmCgroups
from tests.integration.slurm.netns import NetNode, node_network

__all__ = ["SLURM_BINARIES", "missing_binaries", "free_port", "SlurmNode", "SlurmCluster", "slurm_cluster",
           "multi_node_cluster", "owned_cgroups"]

SLURM_BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "srun", "sinfo", "scontrol", "nsenter", "unshare")


def missing_binaries() -> list[str]:
    """The peer's programs not on this machine (scripts/setup.sh test installs them)."""
    return [b for b in SLURM_BINARIES if shutil.which(b) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class SlurmNode:
    """One slurmd: its name, the node line's fields after ``NodeName=`` (hwagent's), its address,
    and the namespace it runs in (None: this host, on the loopback)."""

    name: str
    fields: str
    addr: str = "127.0.0.1"
    net: NetNode | None = None


@dataclass
class SlurmCluster:
    """One slurmctld and a slurmd per node, configured under ``base``."""

    base: Path
    nodes: tuple[SlurmNode, ...]
    gres_conf: str = ""
    gres_types: tuple[str, ...] = ()
    controller_addr: str = "127.0.0.1"
    #: Slurm's cgroup plugins (proctrack/cgroup, task/cgroup) in a test-owned subtree; None: no cgroup plugins
    cgroups: SlurmCgroups | None = None
    #: more slurm.conf lines, before the nodes' (e.g. HealthCheckProgram=)
    extra_conf: tuple[str, ...] = ()
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def node_name(self) -> str:
        """The first node's name (the only one in a one-node cluster)."""
        return self.nodes[0].name

    @property
    def conf(self) -> Path:
        return self.base / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def log(self, daemon: str, node: str | None = None) -> str:
        """A daemon's log; slurmd's of ``node`` (default: the first)."""
        name = f"slurmd.{node or self.node_name}" if daemon == "slurmd" else daemon
        path = self.base / "log" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def write_config(self) -> None:
        for d in ("etc", "state", "log", *(f"spool/{n.name}" for n in self.nodes)):
            (self.base / d).mkdir(parents=True, exist_ok=True)
        run = self.base / "run"
        run.mkdir(exist_ok=True)
        run.chmod(0o755)  # munged wants its socket's directory searchable by all
        b = self.base
        lines = [
            "ClusterName=hwagenttest",
            f"SlurmctldHost={socket.gethostname().split('.')[0]}({self.controller_addr})",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "AuthType=auth/munge",
            f"AuthInfo=socket={run / 'munge.sock'}",
            f"StateSaveLocation={b / 'state'}",
            f"SlurmdSpoolDir={b / 'spool'}/%n",
            f"SlurmctldPidFile={run / 'slurmctld.pid'}",
            f"SlurmdPidFile={run}/slurmd.%n.pid",
            f"SlurmctldLogFile={b / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={b / 'log'}/slurmd.%n.log",
            *(["ProctrackType=proctrack/cgroup", "TaskPlugin=task/cgroup,task/affinity"] if self.cgroups else
              ["ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none"]),
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "MailProg=/bin/true",
            "ReturnToService=2",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
        ]
        if self.gres_types:
            lines.append("GresTypes=" + ",".join(self.gres_types))
        lines += self.extra_conf
        lines += [f"NodeName={n.name} NodeAddr={n.addr} NodeHostname={n.name} {n.fields} State=UNKNOWN"
                  for n in self.nodes]
        lines.append("PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        (self.base / "etc" / "gres.conf").write_text(self.gres_conf)
        if self.cgroups is not None:
            self.cgroups.create()
            (self.base / "etc" / "cgroup.conf").write_text(self.cgroups.cgroup_conf())

    def _start(self, name: str, argv: list[str]) -> None:
        out = open(self.base / "log" / f"{name}.out", "wb")
        self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        out.close()

    def start(self) -> None:
        self.write_config()
        key = self.base / "munge.key"
        subprocess.run(["mungekey", "--create", "--keyfile", str(key)], check=True, capture_output=True)
        key.chmod(0o600)
        run = self.base / "run"
        self._start("munged", ["munged", "--foreground", "--force", f"--key-file={key}",
                               f"--socket={run / 'munge.sock'}", f"--pid-file={run / 'munged.pid'}",
                               f"--seed-file={run / 'munged.seed'}", f"--log-file={self.base / 'log' / 'munged.log'}",
                               "--num-threads=2"])
        self._wait(lambda: (run / "munge.sock").exists(), "munged's socket")
        self._start("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._wait(lambda: self.run(["scontrol", "ping"]).returncode == 0, "slurmctld to answer")
        for n in self.nodes:
            argv = ["slurmd", "-D", "-f", str(self.conf), "-N", n.name]
            self._start(f"slurmd.{n.name}", n.net.wrap(argv) if n.net else argv)

    def _wait(self, ready, what: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited ({p.returncode}) while waiting for {what}:\n"
                                       + (self.base / "log" / f"{name}.out").read_text(errors="replace")[-2000:]
                                       + self._log_file(name)[-2000:])
            if ready():
                return
            time.sleep(0.1)
        raise TimeoutError(f"no {what} within {timeout}s:\n{self.log('slurmctld')[-2000:]}\n"
                           + "\n".join(self.log("slurmd", n.name)[-1000:] for n in self.nodes))

    def _log_file(self, name: str) -> str:
        path = self.base / "log" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def run(self, argv: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout)

    def node_states(self) -> dict[str, str]:
        """``sinfo -N -h -o '%N %T %E'``: node -> "state reason"."""
        out = self.run(["sinfo", "-N", "-h", "-o", "%N %T %E"]).stdout
        return {parts[0]: " ".join(parts[1:]) for line in out.splitlines() if (parts := line.split())}

    def wait_registered(self, timeout: float = 30.0) -> str:
        """Once every slurmd has registered (no node unknown or not responding): the first node's
        "state reason" (``node_states`` has every node's)."""
        seen: dict[str, str] = {}

        def registered() -> bool:
            seen.update(self.node_states())
            states = [seen.get(n.name, "") for n in self.nodes]
            return all(s and not s.startswith(("unknown", "down*", "idle*")) for s in states)

        self._wait(registered, "the nodes to register", timeout)
        return seen[self.node_name]

    def stop(self) -> None:
        slurmds = [k for k in self.procs if k.startswith("slurmd.")]
        for name in (*slurmds, "slurmctld", "munged"):
            p = self.procs.pop(name, None)
            if p is None or p.poll() is not None:
                continue
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.cgroups is not None:
            self.cgroups.remove()


def owned_cgroups(base: Path) -> SlurmCgroups:
    """A subtree named after this process and ``base`` (two clusters never share one), linked from ``base``."""
    import zlib

    return SlurmCgroups(f"hwagent-slurmtest-{os.getpid()}-{zlib.crc32(str(base).encode()):08x}", base / "cgroup")


@contextmanager
def slurm_cluster(base: Path, node_line: str, gres_conf: str = "", gres_types: tuple[str, ...] = (),
                  cgroups: bool = False) -> Iterator[SlurmCluster]:
    """One node on this host: ``node_line`` is hwagent's ``NodeName=<host> ...`` line; ``cgroups``:
    proctrack/cgroup and task/cgroup in a test-owned subtree (``SlurmCluster.cgroups``)."""
    name, _, fields = node_line.removeprefix("NodeName=").partition(" ")
    cluster = SlurmCluster(base, (SlurmNode(name, fields),), gres_conf, tuple(gres_types),
                           cgroups=owned_cgroups(base) if cgroups else None)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@contextmanager
def multi_node_cluster(base: Path, names: list[str], fields: str, gres_conf: str = "",
                       gres_types: tuple[str, ...] = (), cgroups: bool = False,
                       extra_conf: tuple[str, ...] = ()) -> Iterator[SlurmCluster]:
    """A node per name, each in its own network and UTS namespace on a test bridge, all with the
    node line ``fields`` (they share this machine's hardware); slurmctld on the bridge's address;
    ``extra_conf``: more slurm.conf lines."""
    with node_network(names) as net:
        nodes = tuple(SlurmNode(n.name, fields, n.addr, n) for n in net.nodes)
        cluster = SlurmCluster(base, nodes, gres_conf, tuple(gres_types), net.controller_addr,
                               cgroups=owned_cgroups(base) if cgroups else None, extra_conf=tuple(extra_conf))
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()
