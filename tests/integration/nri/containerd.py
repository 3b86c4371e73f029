"""A private containerd for the NRI tests: own config, root, state and sockets under one tmp dir.

It never touches the host's /run/containerd or /var/run/nri: everything it
creates lives under ``base`` (removed by the fixture), NRI is switched on as
containerd 1.7 requires (``[plugins."io.containerd.nri.v1.nri"] disable = false``)
and its socket is ``base/nri.sock``. ``scripts/setup.sh test`` installs the
binary (containerd 1.7 from Debian 13 on Debian 12).

``HWAGENT_CONTAINERD=/path/to/containerd`` points the tests at another build,
e.g. containerd 2.x built offline by ``tests/peer/nri/build.sh``: its ``ctr``
and ``containerd-shim-runc-v2`` are taken from the same directory when they are
there, and a 2.x gets its config in version 3 (2.x dropped version 1 and moved
the CRI's image and runtime settings to ``io.containerd.cri.v1.images`` /
``io.containerd.cri.v1.runtime``); 1.7 gets version 2.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

__all__ = ["ENV_BINARY", "Containerd", "config_text", "containerd_binary", "containerd_version", "skip_reason"]

MIN_VERSION = (1, 7)
#: the environment variable naming another containerd binary than the one on PATH
ENV_BINARY = "HWAGENT_CONTAINERD"


def containerd_binary() -> str | None:
    """``$HWAGENT_CONTAINERD`` when set (even if it is not there: a typo must not test another
    binary), else the containerd on PATH, else None."""
    named = os.environ.get(ENV_BINARY)
    if named:
        return named
    return shutil.which("containerd")


def containerd_version(exe: str | None = None) -> tuple[int, int] | None:
    """(major, minor) of ``exe`` (default: :func:`containerd_binary`), or None when there is none."""
    exe = exe or containerd_binary()
    if exe is None or not os.access(exe, os.X_OK):
        return None
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"\sv?(\d+)\.(\d+)\.", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (containerd runs as root)"
    version = containerd_version()
    if version is None:
        if os.environ.get(ENV_BINARY):
            return f"{ENV_BINARY}={os.environ[ENV_BINARY]} is not an executable containerd"
        return "no containerd on PATH (scripts/setup.sh test installs containerd 1.7 from Debian 13)"
    if version < MIN_VERSION:
        return f"containerd {version[0]}.{version[1]} has no NRI (needs >= 1.7; scripts/setup.sh test)"
    return None


def config_text(base: Path, nri_socket: Path, sandbox_image: str, major: int) -> str:
    """The private containerd's config: version 2 for 1.7, version 3 for 2.x (same settings)."""
    b = base
    common = f"""root = "{b}/root"
state = "{b}/state"
[grpc]
  address = "{b}/containerd.sock"
[ttrpc]
  address = "{b}/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.nri.v1.nri"]
  disable = false
  disable_connections = false
  socket_path = "{nri_socket}"
  plugin_path = "{b}/nri-plugins"
  plugin_config_path = "{b}/nri-conf.d"
  plugin_registration_timeout = "5s"
  plugin_request_timeout = "2s"
"""
    # the sandbox asks for oom_score_adj -998; without CAP_SYS_RESOURCE (a CI container) runc
    # fails to set it, so clamp it to containerd's own as a rootless setup does
    if major >= 2:
        return f"""version = 3
{common}[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "{sandbox_image}"
[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = false
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{b}/cni/bin"]
    conf_dir = "{b}/cni/conf"
"""
    return f"""version = 2
{common}[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  enable_cdi = false
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{b}/cni/bin"
    conf_dir = "{b}/cni/conf"
"""


class Containerd:
    """One containerd process; ``start()`` returns once its NRI socket accepts connections.

    ``binary``: the containerd to run (default :func:`containerd_binary`); a ``ctr`` and a
    ``containerd-shim-runc-v2`` beside it are used before those on PATH."""

    def __init__(self, base: Path, sandbox_image: str = "localhost/hwagent-test/pause:1",
                 binary: str | None = None) -> None:
        self.base = base
        self.sandbox_image = sandbox_image
        self.binary = binary or containerd_binary() or "containerd"
        self.version = containerd_version(self.binary) or MIN_VERSION
        bindir = Path(self.binary).parent
        self.ctr_binary = str(bindir / "ctr") if (bindir / "ctr").is_file() else "ctr"
        self.env = dict(os.environ)
        if (bindir / "containerd-shim-runc-v2").is_file():  # containerd finds its shim on PATH
            self.env["PATH"] = f"{bindir}:{self.env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
        self.cri_socket = base / "containerd.sock"
        self.nri_socket = base / "nri.sock"
        self.config = base / "config.toml"
        self.proc: subprocess.Popen[bytes] | None = None
        self.logs: list[Path] = []
        self.config.write_text(config_text(base, self.nri_socket, sandbox_image, self.version[0]))

    def start(self, timeout: float = 20.0) -> float:
        """Start containerd; return the seconds until its NRI and gRPC sockets were there."""
        log = self.base / f"containerd.{len(self.logs)}.log"
        self.logs.append(log)
        began = time.monotonic()
        with log.open("wb") as out:
            self.proc = subprocess.Popen([self.binary, "--config", str(self.config)], stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True, env=self.env)
        deadline = began + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"containerd exited with {self.proc.returncode}:\n{log.read_text()[-3000:]}")
            # both: containerd 2.x may open the NRI socket before its gRPC (CRI, ctr) socket
            if self.nri_socket.is_socket() and self.cri_socket.is_socket():
                return time.monotonic() - began
            time.sleep(0.02)
        raise RuntimeError(f"containerd's NRI and gRPC sockets did not appear in {timeout} s:\n"
                           f"{log.read_text()[-3000:]}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s; the socket is gone afterwards (a restart makes a new one)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.nri_socket.unlink(missing_ok=True)

    def ctr(self, *args: str, timeout: float = 60) -> str:
        """``ctr`` against this containerd, in CRI's namespace (k8s.io)."""
        p = subprocess.run([self.ctr_binary, "--address", str(self.cri_socket), "--namespace", "k8s.io", *args],
                           capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)}: {p.stderr.strip()}")
        return p.stdout

    def log_text(self, index: int = -1) -> str:
        return self.logs[index].read_text(errors="replace")

    def wait_log(self, pattern: str, timeout: float = 10.0, index: int = -1) -> re.Match[str]:
        """The first match of ``pattern`` in the current log, waiting for it to be written."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.log_text(index))
            if m:
                return m
            if time.monotonic() > deadline:
                raise AssertionError(f"containerd never logged {pattern!r}:\n{self.log_text(index)[-3000:]}")
            time.sleep(0.05)
