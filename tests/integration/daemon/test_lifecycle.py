"""`hwagent run` as a real process: READY over a real NOTIFY_SOCKET, scrape over HTTP,
SIGTERM/SIGINT, exit status, and nothing left behind under the root dir.

This is systemd's view of the daemon, played by the test: the notify socket is a
plain AF_UNIX datagram socket like systemd's, and signals are real signals.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent import __version__
from agent.daemon.daemon import ROOT_LAYOUT
from agent.topology.sysfs import read_topology

REPO = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 60  # two shared cores under a full test suite: generous, never a timing assertion
M = "tests.unit.daemon.fake_components"
#: the venv's console script, as systemd and scripts/dev run it
HWAGENT = Path(sys.executable).parent / "hwagent"


class SystemdStub:
    """A datagram socket standing in for systemd's notify socket."""

    def __init__(self, abstract: bool = False) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f"hwagent-test-{os.getpid()}-{id(self)}"
            self.sock.bind(b"\0" + name.encode())
            self.env_value = f"@{name}"
            self._dir = None
        else:
            # AF_UNIX paths are limited to 107 bytes; pytest's tmp_path can be longer
            self._dir = tempfile.mkdtemp(prefix="hwn-", dir="/tmp")
            path = os.path.join(self._dir, "notify")
            self.sock.bind(path)
            self.env_value = path
        self.messages: list[dict[str, str]] = []

    def wait_for(self, key: str, proc: subprocess.Popen, timeout: float = START_TIMEOUT_S) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        for m in self.messages:
            if key in m:
                return m
        while time.monotonic() < deadline:
            self.sock.settimeout(0.2)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                if proc.poll() is not None:
                    # drain what is already queued before giving up
                    self.sock.setblocking(False)
                    try:
                        data = self.sock.recv(65536)
                    except BlockingIOError:
                        raise AssertionError(f"daemon exited ({proc.returncode}) before sending {key}") from None
                else:
                    continue
            fields = dict(line.split("=", 1) for line in data.decode().split("\n") if line)
            self.messages.append(fields)
            if key in fields:
                return fields
        raise AssertionError(f"no {key} from the daemon within {timeout} s; got {self.messages}")

    def close(self) -> None:
        self.sock.close()
        if self._dir:
            for f in os.listdir(self._dir):
                os.unlink(os.path.join(self._dir, f))
            os.rmdir(self._dir)


@pytest.fixture
def systemd():
    stub = SystemdStub()
    yield stub
    stub.close()


class Daemon:
    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str] | None = None,
                 components: tuple[str, ...] | None = None, nofile: int | None = None) -> None:
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.root = tmp_path / "root"
        self.stderr_path = tmp_path / "stderr.log"
        self.stderr = open(self.stderr_path, "w")
        # a lock dir of the test's own: the machine-wide default would make daemons of tests run
        # side by side (other checkouts, other suites) refuse each other; a test of the claim
        # between two daemons passes the same --lock-dir to both (a later flag wins)
        argv = ["run", "--root-dir", str(self.root), "--metrics-address", "127.0.0.1:0", "--mode", "standalone",
                "--lock-dir", str(tmp_path / "locks"), *args]
        if components is None:
            cmd = [str(HWAGENT), *argv]
        else:
            # the real CLI with COMPONENTS swapped for test components (as a future COMPONENTS line would)
            code = ("import sys, agent.daemon.daemon as d; d.COMPONENTS = tuple(filter(None, sys.argv[1].split(',')));"
                    "from agent.cli import main; sys.exit(main(sys.argv[2:]))")
            cmd = [sys.executable, "-c", code, ",".join(components), *argv]
        if nofile is not None:
            # util-linux's prlimit, not a preexec_fn: a Python callback between fork and exec
            # runs in a copy of a process whose gRPC threads (earlier tests) are mid-call, and
            # gRPC can abort there (seen under load: SIGABRT before exec)
            cmd = ["prlimit", f"--nofile={nofile}:{nofile}", "--", *cmd]
        full_env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC",
                                                                       "WATCHDOG_PID", "JOURNAL_STREAM")}
        full_env.update(env or {})
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=full_env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.stderr)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def log(self) -> str:
        self.stderr.flush()
        return self.stderr_path.read_text()

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


@pytest.fixture
def daemons():
    started: list[Daemon] = []

    def start(*args, **kw) -> Daemon:
        d = Daemon(*args, **kw)
        started.append(d)
        return d

    yield start
    for d in started:
        d.cleanup()


def get(url: str, accept: str | None = None) -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def leftovers(root: Path) -> list[str]:
    """What a stopped daemon must not leave under its root: sockets, FIFOs, its pid file.

    Directories (the layout, a component's state dir) and regular files
    (checkpoints, records) are state meant to outlive a restart.
    """
    assert all((root / d).is_dir() for d in ROOT_LAYOUT)
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_socket() or p.is_fifo() or p.name == "hwagent.pid":
            out.append(str(p.relative_to(root)))
    return out


def metrics_url(ready: dict[str, str]) -> str:
    m = re.search(r"metrics=(http://\S+/metrics)", ready["STATUS"])
    assert m, ready
    return m.group(1)


class NodeMemorySampler:
    """Node MemTotal as the topology reader sees it, sampled while the daemon starts.

    This machine hot-plugs memory in 128 MiB blocks (a VM with a balloon/hotplug), so
    node MemTotal can move by a block between the daemon's read and the test's. The
    daemon's figure must be one the node really had meanwhile: within the range sampled
    from before the daemon started until after the scrape.
    """

    def __init__(self) -> None:
        self.seen: dict[int, list[int]] = {}
        self._stop = threading.Event()
        self.sample()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> None:
        for node in read_topology().numa_nodes:
            if node.memory_bytes is not None:
                self.seen.setdefault(node.id, []).append(node.memory_bytes)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.sample()

    def stop(self) -> dict[int, tuple[int, int]]:
        self._stop.set()
        self._thread.join()
        self.sample()
        return {n: (min(v), max(v)) for n, v in self.seen.items()}


@pytest.mark.slow  # the real COMPONENTS start here (the BPF compile goes on in the background)
def test_run_ready_scrape_sigterm(tmp_path, systemd, daemons):
    """The installed console script with its real components: the full systemd view."""
    memory = NodeMemorySampler()
    d = daemons(tmp_path, env={"NOTIFY_SOCKET": systemd.env_value, "WATCHDOG_USEC": "400000"})
    ready = systemd.wait_for("READY", d.proc)
    assert ready["READY"] == "1" and ready["MAINPID"] == str(d.proc.pid)
    assert "mode=standalone" in ready["STATUS"]
    url = metrics_url(ready)
    base = url.rsplit("/", 1)[0]

    # the pid file names the daemon while it runs
    assert (d.root / "hwagent.pid").read_text().strip() == str(d.proc.pid)

    status, headers, body = get(url)
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s
    build = [s for (name, _), s in samples.items() if name == "hwagent_build_info"]
    assert len(build) == 1 and build[0].value == 1
    assert build[0].labels["version"] == __version__
    assert build[0].labels["kernel"] == os.uname().release
    assert build[0].labels["python_version"] == ".".join(map(str, sys.version_info[:3]))

    # the topology gauges are the live machine as the sysfs reader sees it
    topo = read_topology()
    assert samples[("hwagent_topology_cpus", (("state", "online"),))].value == len(topo.online)
    assert samples[("hwagent_topology_cpus", (("state", "offline"),))].value == len(topo.offline)
    assert samples[("hwagent_topology_cpus", (("state", "isolated"),))].value == len(topo.isolated)
    assert samples[("hwagent_topology_cores", ())].value == len(topo.cores)
    assert samples[("hwagent_topology_packages", ())].value == len(topo.package_ids)
    assert samples[("hwagent_topology_numa_nodes", ())].value == len(topo.numa_nodes)
    for node_id, (low, high) in memory.stop().items():
        key = ("hwagent_topology_numa_node_memory_bytes", (("numa_node", str(node_id)),))
        assert low <= samples[key].value <= high, (samples[key].value, low, high)
    assert samples[("process_resident_memory_bytes", ())].value > 0

    status, headers, body = get(url, accept="application/openmetrics-text; version=1.0.0")
    assert status == 200 and headers["Content-Type"].startswith("application/openmetrics-text")
    assert body.endswith("# EOF\n")

    status, _, text = get(f"{base}/healthz")
    assert status == 200 and text.startswith("ok\n"), text
    # every component has its line; the pressure component's readiness is its own
    names = [line.split(":", 1)[0] for line in text.splitlines()[1:]]
    assert names and "pressure" in names and "cpu" in names, text

    # the watchdog pings come from the loop at WATCHDOG_USEC/2
    systemd.wait_for("WATCHDOG", d.proc, timeout=30)

    assert d.stop(signal.SIGTERM) == 0
    stopping = systemd.wait_for("STOPPING", d.proc, timeout=5)
    assert stopping["STOPPING"] == "1"
    assert leftovers(d.root) == []

    log = d.log()
    lines = log.splitlines()
    assert lines, "no log output"
    for line in lines:
        assert re.match(r"ts=\S+Z level=(debug|info|warning|error) logger=\S+ msg=", line), line
    assert re.search(r'msg="mode resolved" mode=standalone why=', log)
    assert re.search(r'msg="metrics endpoint listening" address=127\.0\.0\.1:\d+', log)
    assert 'msg="hwagent stopped" clean=true' in lines[-1]
    # the embedded defaults fit this machine: the reclaim minimum is the CPUs there are, at most 4
    assert "config value cannot apply" not in log, log
    want = min(4, len(topo.online))
    assert re.search(rf'msg="cpu policy started" .*reclaim_min={want}\b', log), log


def test_embedded_defaults_fit_this_machine(tmp_path, systemd, daemons):
    """No --config: the embedded defaults start without a 'config value cannot apply' warning
    on whatever machine runs the test (on 2 CPUs the reclaim minimum used to be 4)."""
    d = daemons(tmp_path, env={"NOTIFY_SOCKET": systemd.env_value}, components=(f"{M}:alpha",))
    systemd.wait_for("READY", d.proc)
    assert d.stop(signal.SIGTERM) == 0
    log = d.log()
    assert 'config="embedded defaults"' in log, log
    assert "config value cannot apply" not in log, log


def test_sigint_with_components_leaves_nothing(tmp_path, daemons):
    stub = SystemdStub(abstract=True)  # systemd's abstract-namespace form of NOTIFY_SOCKET
    events = tmp_path / "events"
    try:
        d = daemons(tmp_path, env={"NOTIFY_SOCKET": stub.env_value, "HWAGENT_TEST_EVENTS": str(events)},
                    components=(f"{M}:alpha", f"{M}:beta", f"{M}:disabled"))
        ready = stub.wait_for("READY", d.proc)
        assert "components=2" in ready["STATUS"]
        sock = d.root / "device-plugins" / "alpha.sock"
        assert sock.is_socket()
        _, _, body = get(metrics_url(ready))
        assert 'hwagent_component_healthy{component="alpha"} 1.0' in body
        assert d.stop(signal.SIGINT) == 0
    finally:
        stub.close()
    assert events.read_text().splitlines() == ["start alpha", "start beta", "stop beta", "stop alpha"]
    assert leftovers(d.root) == []


def test_failing_component_exits_1_and_cleans_up(tmp_path, systemd, daemons):
    events = tmp_path / "events"
    d = daemons(tmp_path, env={"NOTIFY_SOCKET": systemd.env_value, "HWAGENT_TEST_EVENTS": str(events)},
                components=(f"{M}:alpha", f"{M}:broken", f"{M}:beta"))
    assert d.proc.wait(START_TIMEOUT_S) == 1
    systemd.wait_for("STOPPING", d.proc, timeout=5)
    assert not any("READY" in m for m in systemd.messages)  # never claimed to be ready
    assert events.read_text().splitlines() == ["start alpha", "start broken", "stop broken", "stop alpha"]
    log = d.log()
    assert re.search(r'msg="cannot start" error="component broken failed to start: broken cannot start', log)
    assert leftovers(d.root) == []


def test_config_error_is_one_line_exit_2(tmp_path, daemons):
    cfg = tmp_path / "hw.toml"
    cfg.write_text("[daemon]\nlog_level = 'loud'\n")
    d = daemons(tmp_path, "--config", str(cfg))
    assert d.proc.wait(START_TIMEOUT_S) == 2
    assert d.log() == (
        f"hwagent run: error: {cfg}: daemon.log_level: must be one of "
        '"debug", "info", "warning", "error", got "loud"\n'
    )
    assert not d.root.exists()  # refused before touching anything


def test_journald_stream_gets_priorities(tmp_path, systemd, daemons):
    # JOURNAL_STREAM names the stream by device:inode; here that is the stderr file itself
    stderr_file = tmp_path / "stderr.log"
    stderr_file.touch()
    st = stderr_file.stat()
    d = daemons(tmp_path, env={"NOTIFY_SOCKET": systemd.env_value, "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"},
                components=())
    systemd.wait_for("READY", d.proc)
    assert d.stop() == 0
    lines = d.log().splitlines()
    assert lines and all(re.match(r"<[2-7]>level=\w+ logger=", line) for line in lines), lines
    assert any(line.startswith("<6>level=info") for line in lines)


PRESSURE_ONLY = ("agent.pressure.component:factory",)
NO_PROBES = "runqlat = false\nblockio = false\nnetdev = false\niommu = false\nthermal = false\nirq = false\n"


def thresholds(url: str) -> dict[str, float]:
    _, _, body = get(url)
    out = {}
    for family in text_string_to_metric_families(body):
        if family.name == "hwagent_pressure_eviction_threshold":
            out = {s.labels["kind"]: s.value for s in family.samples}
    return out


def test_sighup_reloads_the_config_and_keeps_running(tmp_path, systemd, daemons):
    """SIGHUP used to stop the daemon (exit 0: Restart=on-failure left the node without it)."""
    conf = tmp_path / "hwagent.toml"
    conf.write_text(f'[daemon]\nlog_level = "info"\n[pressure]\nsoft_threshold = 0.5\nhard_threshold = 1.0\n{NO_PROBES}')
    d = daemons(tmp_path, "--config", str(conf), env={"NOTIFY_SOCKET": systemd.env_value}, components=PRESSURE_ONLY)
    url = metrics_url(systemd.wait_for("READY", d.proc))
    assert thresholds(url) == {"soft": 0.5, "hard": 1.0}

    # live: log level and thresholds; restart-only: a map size; the flag still beats the file
    conf.write_text('[daemon]\nlog_level = "debug"\nmetrics_address = "127.0.0.1:1"\n'
                    f'[pressure]\nsoft_threshold = 0.2\nhard_threshold = 0.4\nmax_cgroups = 1024\n{NO_PROBES}')
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + START_TIMEOUT_S
    while 'msg="config reloaded"' not in d.log() and time.monotonic() < deadline and d.proc.poll() is None:
        time.sleep(0.1)
    assert d.proc.poll() is None, d.log()
    log = d.log()
    assert re.search(r'msg="config reloaded" applied=\S*daemon.log_level', log), log
    assert re.search(r'msg="config changes need a restart" settings=pressure.max_cgroups', log), log
    assert thresholds(url) == {"soft": 0.2, "hard": 0.4}

    # a broken file is refused and changes nothing
    conf.write_text("[pressure\nsoft_threshold = 0.9\n")
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + START_TIMEOUT_S
    while 'msg="config reload refused"' not in d.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert 'msg="config reload refused" error=' in d.log(), d.log()
    assert d.proc.poll() is None and thresholds(url) == {"soft": 0.2, "hard": 0.4}

    assert d.stop(signal.SIGTERM) == 0
    assert leftovers(d.root) == []


@pytest.mark.slow
def test_sigterm_while_the_probes_compile_stops_cleanly(tmp_path, systemd, daemons):
    """READY comes before the BPF compile; a stop right then neither waits for the compile
    nor leaves anything behind (under TCG the compile takes minutes)."""
    d = daemons(tmp_path, env={"NOTIFY_SOCKET": systemd.env_value})
    url = metrics_url(systemd.wait_for("READY", d.proc))
    _, _, health = get(url.replace("/metrics", "/healthz"))
    loading = "pressure: healthy, not ready: loading probes" in health
    assert d.stop(signal.SIGTERM) == 0
    assert leftovers(d.root) == []
    log = d.log()
    assert 'msg="hwagent stopped" clean=true' in log.splitlines()[-1], log[-2000:]
    assert "Traceback" not in log
    if not loading:  # the compile won the race on this run: still a clean stop, nothing more to see
        pytest.skip(f"probes were already loaded at the first /healthz: {health!r}")
