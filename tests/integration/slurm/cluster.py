"""A real Slurm cluster on this machine for tests: munged, slurmctld and slurmd (Debian's slurm-wlm).

Everything lives under one test-owned directory: the munge key and socket, the
configuration (slurm.conf and gres.conf side by side, where slurmd looks for
gres.conf), state, spool, logs and pid files. Ports are chosen free; the daemons
run as root (``SlurmUser=root``), with no cgroup plugins (``proctrack/linuxproc``,
``task/none``): the tests make no cgroups outside their own subtrees. Each daemon
is started in the foreground as our child and stopped by its pid on exit, so
nothing of the packages' system services (stopped by scripts/setup.sh) is used
or disturbed. The later parts of issue 35 (namespaced multi-node clusters)
build on ``SlurmCluster``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SLURM_BINARIES", "missing_binaries", "free_port", "SlurmCluster", "slurm_cluster"]

SLURM_BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "srun", "sinfo", "scontrol")


def missing_binaries() -> list[str]:
    """The peer's programs not on this machine (scripts/setup.sh test installs them)."""
    return [b for b in SLURM_BINARIES if shutil.which(b) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SlurmCluster:
    """One slurmctld and one slurmd on this host, configured under ``base``."""

    base: Path
    node_line: str
    gres_conf: str = ""
    gres_types: tuple[str, ...] = ()
    node_name: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.base / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def log(self, daemon: str) -> str:
        path = self.base / "log" / f"{daemon}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def write_config(self) -> None:
        for d in ("etc", "state", "spool", "log"):
            (self.base / d).mkdir(parents=True, exist_ok=True)
        run = self.base / "run"
        run.mkdir(exist_ok=True)
        run.chmod(0o755)  # munged wants its socket's directory searchable by all
        b = self.base
        lines = [
            "ClusterName=hwagenttest",
            f"SlurmctldHost={self.node_name}(127.0.0.1)",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "AuthType=auth/munge",
            f"AuthInfo=socket={run / 'munge.sock'}",
            f"StateSaveLocation={b / 'state'}",
            f"SlurmdSpoolDir={b / 'spool'}",
            f"SlurmctldPidFile={run / 'slurmctld.pid'}",
            f"SlurmdPidFile={run / 'slurmd.pid'}",
            f"SlurmctldLogFile={b / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={b / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
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
        lines.append(f"{self.node_line} NodeAddr=127.0.0.1 State=UNKNOWN")
        lines.append("PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        (self.base / "etc" / "gres.conf").write_text(self.gres_conf)

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
        self._start("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.node_name])

    def _wait(self, ready, what: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited ({p.returncode}) while waiting for {what}:\n"
                                       + (self.base / "log" / f"{name}.out").read_text(errors="replace")[-2000:]
                                       + self.log(name)[-2000:])
            if ready():
                return
            time.sleep(0.1)
        raise TimeoutError(f"no {what} within {timeout}s:\n{self.log('slurmctld')[-2000:]}\n{self.log('slurmd')[-2000:]}")

    def run(self, argv: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout)

    def node_states(self) -> dict[str, str]:
        """``sinfo -N -h -o '%N %T %E'``: node -> "state reason"."""
        out = self.run(["sinfo", "-N", "-h", "-o", "%N %T %E"]).stdout
        return {parts[0]: " ".join(parts[1:]) for line in out.splitlines() if (parts := line.split())}

    def wait_registered(self, timeout: float = 20.0) -> str:
        """The node's state once slurmd has registered (not unknown or not responding)."""
        seen: dict[str, str] = {}

        def registered() -> bool:
            seen.update(self.node_states())
            state = seen.get(self.node_name, "")
            return bool(state) and not state.startswith(("unknown", "down*", "idle*"))

        self._wait(registered, f"node {self.node_name} to register", timeout)
        return seen[self.node_name]

    def stop(self) -> None:
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.procs.pop(name, None)
            if p is None or p.poll() is not None:
                continue
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@contextmanager
def slurm_cluster(base: Path, node_line: str, gres_conf: str = "", gres_types: Mapping[str, None] | tuple[str, ...] = ()
                  ) -> Iterator[SlurmCluster]:
    cluster = SlurmCluster(base, node_line, gres_conf, tuple(gres_types))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
