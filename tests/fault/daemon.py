"""A real ``hwagent run`` for the fault tier, built on the daemon tier's own
process harness (tests/integration/daemon/test_lifecycle.py: the console
script, a systemd notify stub, signals).

The configuration keeps what the tier exercises and drops what only costs time
on a shared two-core machine: pressure probes (BPF compilation) are off, CPU
enforcement is off (the policy's state and checkpoint are what matter here),
and the built-in device plugins serve one resource over the loop block devices
every Debian machine has.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

from tests.integration.daemon.test_lifecycle import START_TIMEOUT_S, Daemon, SystemdStub, metrics_url

LOOP_RESOURCE = "example.com/loop"

CONFIG = f"""
[pressure]
enabled = false
[devices]
default_rules = false
hotplug = false
resources = [{{name = "{LOOP_RESOURCE}", block_name = ["loop*"]}}]
[cpu]
enforce_cgroups = false
"""


@dataclass
class Sockets:
    root: Path

    @property
    def registration(self) -> Path:
        return self.root / "device-plugins" / "registration.sock"

    @property
    def loop_plugin(self) -> Path:
        return self.root / "device-plugins" / ("hwagent-" + LOOP_RESOURCE.replace("/", "_") + ".sock")

    @property
    def pod_resources(self) -> Path:
        return self.root / "pod-resources" / "pod-resources.sock"

    @property
    def cpu(self) -> Path:
        return self.root / "cpu" / "qrm_cpu_plugin_dynamic.sock"


@dataclass
class RunningDaemon:
    base: Path
    daemon: Daemon
    stub: SystemdStub
    ready: dict[str, str] | None = None
    _closed: bool = False

    @classmethod
    def start(cls, base: Path, config: str = CONFIG, wait: bool = True) -> RunningDaemon:
        """Start on ``base``/root; with ``wait``, until READY (raises if it exits first)."""
        base.mkdir(parents=True, exist_ok=True)
        cfg = base / "hw.toml"
        cfg.write_text(config)
        stub = SystemdStub()
        d = Daemon(base, "--config", str(cfg), env={"NOTIFY_SOCKET": stub.env_value})
        rd = cls(base, d, stub)
        if wait:
            rd.ready = stub.wait_for("READY", d.proc)
        return rd

    def ready_or_exit(self) -> int | None:
        """Wait until READY (None) or until the daemon exits (its exit code)."""
        try:
            self.ready = self.stub.wait_for("READY", self.daemon.proc, timeout=START_TIMEOUT_S)
            return None
        except AssertionError:
            if self.daemon.proc.poll() is not None:
                return self.daemon.proc.returncode
            raise

    @property
    def root(self) -> Path:
        return self.daemon.root

    @property
    def sockets(self) -> Sockets:
        return Sockets(self.root)

    @property
    def metrics(self) -> str:
        assert self.ready is not None
        return metrics_url(self.ready)

    def alive(self) -> bool:
        return self.daemon.proc.poll() is None

    def kill9(self) -> None:
        self.daemon.proc.send_signal(signal.SIGKILL)
        self.daemon.proc.wait(60)

    def stop(self) -> int:
        return self.daemon.stop(signal.SIGTERM, timeout=60)

    def log(self) -> str:
        return self.daemon.log()

    def cleanup(self) -> None:
        """Idempotent: kill what still runs, close the log and the notify socket."""
        if self._closed:
            return
        self._closed = True
        self.daemon.cleanup()
        self.stub.close()
