"""One hwagent daemon with ``[slurm]`` on, naming the steps of one Slurm node (issue 35 part 2 tests).

The daemon runs on this host in standalone mode with its own root, lock dir and
runtime subtree (several run side by side, one per Slurm node), metrics on a free
port with the series that name jobs turned on, devices and pressure off. Its
``[slurm]`` section points at the test cluster: the node's name, the cluster's
slurm.conf, and the test-owned cgroup subtree Slurm's plugins use.
"""

from __future__ import annotations

import os
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.cgroup_support import kill_and_remove_subtree
from tests.integration.daemon.test_lifecycle import HWAGENT, Daemon
from tests.integration.runtime.test_end_to_end import until
from tests.integration.slurm.cluster import SlurmCluster, free_port

__all__ = ["JobAgent", "job_agent", "STEP_FAMILY"]

STEP_FAMILY = "hwagent_slurm_step_runqueue_delay_seconds"


class JobAgent:
    def __init__(self, base: Path, cluster: SlurmCluster, node: str, devices: str = "") -> None:
        """``devices``: the daemon's [devices] section's body (rules); empty = devices off."""
        assert cluster.cgroups is not None, "the cluster runs without cgroup plugins: nothing to name"
        self.base = base
        self.node = node
        self.port = free_port()
        self.subtree = f"/hwagent-test-slurmjobs-{os.getpid()}-{node}"
        base.mkdir(parents=True, exist_ok=True)
        self.config = base / "hwagent.toml"
        self.config.write_text(
            "[daemon]\nmetrics_pod_labels = true\n"
            "[pressure]\nenabled = false\n"
            + (f"[devices]\n{devices}" if devices else "[devices]\nenabled = false\n") +
            f'[runtime]\ncgroup_subtree = "{self.subtree}"\n'
            f'[slurm]\nenabled = true\nnode_name = "{node}"\nslurm_conf = "{cluster.conf}"\n'
            f'cgroup_parent = "{cluster.cgroups.tag}"\nrefresh_s = 0.5\n')
        self.daemon: Daemon | None = None

    def start(self) -> None:
        self.daemon = Daemon(self.base / "d", "--config", str(self.config),
                             "--metrics-address", f"127.0.0.1:{self.port}")
        until(lambda: "hwagent ready" in self.daemon.log(), "the daemon to be ready", self.daemon)

    def kill(self) -> None:
        """SIGKILL: nothing of the daemon's own shutdown runs."""
        assert self.daemon is not None
        self.daemon.proc.send_signal(signal.SIGKILL)
        self.daemon.proc.wait(30)
        self.daemon.cleanup()

    def stop(self) -> None:
        if self.daemon is not None:
            if self.daemon.proc.poll() is None:
                assert self.daemon.stop() == 0, self.daemon.log()
            self.daemon.cleanup()

    def metrics(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=30) as r:
            text = r.read().decode()
        out: dict[str, list[tuple[dict[str, str], float]]] = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                out.setdefault(s.name, []).append((dict(s.labels), s.value))
        return out

    def status(self) -> str:
        """``hwagent status`` (as root) of this daemon."""
        assert self.daemon is not None
        r = subprocess.run([str(HWAGENT), "status", "--root-dir", str(self.daemon.root)], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def series(self, name: str) -> dict[tuple[str, str, str, str], float]:
        """A step family's samples by (job, step, user, partition)."""
        return {(lb["job"], lb["step"], lb["user"], lb["partition"]): v for lb, v in self.metrics().get(name, [])}

    def named_steps(self) -> set[tuple[str, str, str, str]]:
        """(job, step, user, partition) of every step the run-queue series names."""
        return {k for k in self.series(f"{STEP_FAMILY}_total") if k[0] != "other"}


@contextmanager
def job_agent(base: Path, cluster: SlurmCluster, node: str, devices: str = "") -> Iterator[JobAgent]:
    agent = JobAgent(base, cluster, node, devices)
    try:
        agent.start()
        yield agent
    finally:
        agent.stop()
        kill_and_remove_subtree(agent.subtree)
