"""The daemon in-process: component order, failures, health, root dir, mode, pid lock."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import urllib.request
from pathlib import Path

import pytest

from agent.config import load
from agent.daemon.daemon import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_OK,
    PID_FILE,
    ROOT_LAYOUT,
    Daemon,
    DaemonError,
    PidFile,
    load_factory,
    prepare_root,
    resolve_mode,
)
from agent.daemonconfig import DaemonConfig
from agent.topology import synthetic
from tests.unit.daemon import fake_components as fc

M = "tests.unit.daemon.fake_components"


@pytest.fixture(autouse=True)
def _reset():
    fc.EVENTS.clear()
    fc.HEALTH.clear()
    yield
    fc.EVENTS.clear()
    fc.HEALTH.clear()


def logged(caplog, msg: str, **fields) -> bool:
    """Whether a record with this event and these fields (substring match) was logged."""
    for r in caplog.records:
        got = getattr(r, "fields", {})
        if r.getMessage() == msg and all(v in str(got.get(k, "")) for k, v in fields.items()):
            return True
    return False


def make_daemon(tmp_path: Path, components: tuple[str, ...], **daemon_cfg) -> Daemon:
    cfg = load(None).replace(
        "daemon",
        root_dir=str(tmp_path / "root"),
        metrics_address="127.0.0.1:0",
        mode="standalone",
        # the machine-wide default lock dir would pit parallel test runs against each other
        **{"lock_dir": str(tmp_path / "locks"), **daemon_cfg},
    )
    return Daemon(
        cfg,
        components=components,
        topology_reader=lambda sysfs, procfs: synthetic(sockets=1, numa_per_socket=1, cores_per_numa=2),
        environ={},
    )


def run_daemon(daemon: Daemon, while_running=None) -> tuple[int, object]:
    """Run until ready, call ``while_running(daemon)`` (sync, in a thread), then stop; exit code and its result."""

    async def main():
        task = asyncio.create_task(daemon.run())
        while daemon.phase not in ("running", "stopped", "stopping"):
            await asyncio.sleep(0.01)
        result = None
        if daemon.phase == "running" and while_running is not None:
            result = await asyncio.to_thread(while_running, daemon)
        daemon.request_stop("test over")
        return await asyncio.wait_for(task, 30), result

    return asyncio.run(main())


def http_get(daemon: Daemon, path: str) -> tuple[int, str]:
    host, port = daemon.metrics_address
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_components_start_in_order_and_stop_in_reverse(tmp_path):
    d = make_daemon(tmp_path, (f"{M}:alpha", f"{M}:disabled", f"{M}:beta", f"{M}:needs_services"))

    def probe(d):
        assert (tmp_path / "root/device-plugins/alpha.sock").exists()
        return http_get(d, "/healthz"), http_get(d, "/metrics")

    code, ((hz_status, hz_body), (m_status, m_body)) = run_daemon(d, probe)
    assert code == EXIT_OK
    assert fc.EVENTS == [
        ("start", "alpha"), ("start", "beta"), ("start", "needs_services"),
        ("stop", "needs_services"), ("stop", "beta"), ("stop", "alpha"),
    ]
    # one line per component after the verdict: health and readiness
    assert (hz_status, hz_body) == (200, "ok\nalpha: healthy, ready\nbeta: healthy, ready\nneeds_services: healthy, ready\n")
    assert m_status == 200
    assert 'hwagent_component_healthy{component="alpha"} 1.0' in m_body
    assert 'hwagent_topology_cpus{state="online"} 4.0' in m_body
    assert "process_cpu_seconds_total" in m_body
    # nothing left behind but the layout
    root = tmp_path / "root"
    assert sorted(p.name for p in root.iterdir()) == sorted(ROOT_LAYOUT)
    assert not any(root.rglob("*.sock"))
    assert d.phase == "stopped"


def test_a_failing_start_stops_the_started_ones(tmp_path, caplog):
    d = make_daemon(tmp_path, (f"{M}:alpha", f"{M}:beta", f"{M}:broken", f"{M}:needs_services"))
    code, _ = run_daemon(d)
    assert code == EXIT_FAILED
    # broken raised inside start() after binding its socket: it is stopped too, then the others in reverse
    assert fc.EVENTS == [
        ("start", "alpha"), ("start", "beta"), ("start", "broken"),
        ("stop", "broken"), ("stop", "beta"), ("stop", "alpha"),
    ]
    assert logged(caplog, "component failed to start", component="broken", error="broken cannot start: no such device")
    assert logged(caplog, "cannot start", error="component broken failed to start")
    assert not any((tmp_path / "root").rglob("*.sock"))
    assert not (tmp_path / "root" / PID_FILE).exists()


def test_a_failing_factory_names_the_entry(tmp_path, caplog):
    d = make_daemon(tmp_path, (f"{M}:alpha", f"{M}:bad_factory"))
    code, _ = run_daemon(d)
    assert code == EXIT_FAILED
    assert fc.EVENTS == [("start", "alpha"), ("stop", "alpha")]
    assert logged(caplog, "cannot start", error=f"component {M}:bad_factory: KeyError")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no_colon", "is not 'module:factory'"),
        ("agent.no_such_module:f", "cannot import agent.no_such_module"),
        (f"{M}:no_such_factory", "has no callable 'no_such_factory'"),
        (f"{M}:EVENTS", "has no callable 'EVENTS'"),
    ],
)
def test_load_factory_errors(spec, message):
    with pytest.raises(DaemonError, match=message):
        load_factory(spec)


def test_unhealthy_component_makes_healthz_503(tmp_path):
    d = make_daemon(tmp_path, (f"{M}:alpha", f"{M}:beta"))

    def probe(d):
        fc.HEALTH["beta"] = False
        first = http_get(d, "/healthz")
        metrics_body = http_get(d, "/metrics")[1]
        fc.HEALTH["beta"] = True
        return first, metrics_body, http_get(d, "/healthz")

    code, (bad, metrics_body, good) = run_daemon(d, probe)
    assert code == EXIT_OK
    assert bad == (503, "unhealthy: beta\nalpha: healthy, ready\nbeta: UNHEALTHY, ready\n")
    assert 'hwagent_component_healthy{component="beta"} 0.0' in metrics_body
    assert good == (200, "ok\nalpha: healthy, ready\nbeta: healthy, ready\n")


def test_health_is_503_outside_running(tmp_path):
    d = make_daemon(tmp_path, ())
    assert d.health().ok is False and d.health().detail == "new"
    code, report = run_daemon(d, lambda d: d.health())
    assert report.ok
    assert d.health().detail == "stopped"


def test_component_can_stop_the_daemon_with_failure(tmp_path, caplog):
    d = make_daemon(tmp_path, (f"{M}:alpha", f"{M}:crashing"))

    async def main():
        return await asyncio.wait_for(d.run(), 30)  # no request_stop from the test: the component does it

    assert asyncio.run(main()) == EXIT_FAILED
    assert fc.EVENTS[-2:] == [("stop", "crashing"), ("stop", "alpha")]
    assert logged(caplog, "stop requested", reason="crashing: worker died")


def test_stop_failures_and_timeouts_give_exit_1_but_stop_the_rest(tmp_path, caplog):
    d = make_daemon(tmp_path, (f"{M}:alpha", f"{M}:bad_stop", f"{M}:hangs"), stop_timeout_seconds=0.2)
    code, _ = run_daemon(d)
    assert code == EXIT_FAILED
    assert [e for e in fc.EVENTS if e[0] == "stop"] == [("stop", "hangs"), ("stop", "bad_stop"), ("stop", "alpha")]
    assert logged(caplog, "component did not stop in time", component="hangs")
    assert logged(caplog, "component failed to stop", component="bad_stop", error="bad_stop stop failed")
    assert not any((tmp_path / "root").rglob("*.sock"))


def test_remove_on_exit_is_the_safety_net(tmp_path, caplog):
    d = make_daemon(tmp_path, (f"{M}:leaky",))
    code, _ = run_daemon(d, lambda d: (tmp_path / "root/device-plugins/leaky.sock").exists())
    assert code == EXIT_OK
    assert not (tmp_path / "root/device-plugins/leaky.sock").exists()
    assert logged(caplog, "removed a file its component left behind", path="leaky.sock")


def test_foreign_sockets_are_reported_not_removed(tmp_path, caplog):
    def plant(d):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(tmp_path / "root/device-plugins/vendor.sock"))
        s.close()

    d = make_daemon(tmp_path, ())
    assert run_daemon(d, plant)[0] == EXIT_OK
    assert (tmp_path / "root/device-plugins/vendor.sock").exists()
    assert logged(caplog, "socket left under root dir after stop", path="vendor.sock")


def test_topology_failure_is_one_clear_error(tmp_path, caplog):
    d = make_daemon(tmp_path, (f"{M}:alpha",))

    def boom(sysfs, procfs):
        raise OSError(2, "No such file or directory", f"{sysfs}/devices/system/cpu")

    d.topology_reader = boom
    code, _ = run_daemon(d)
    assert code == EXIT_FAILED
    assert fc.EVENTS == []
    assert logged(caplog, "cannot start", error="cannot read topology from /sys")


def test_second_daemon_on_the_same_root_is_refused(tmp_path, caplog):
    first = make_daemon(tmp_path, (f"{M}:alpha",))

    def second(_):
        other = make_daemon(tmp_path, (f"{M}:alpha",))
        return asyncio.run(other.run())

    code, second_code = run_daemon(first, second)
    assert code == EXIT_OK
    assert second_code == EXIT_FAILED
    assert logged(
        caplog, "cannot start", error=f"another hwagent (pid {os.getpid()}) is running with root dir {tmp_path / 'root'}"
    )
    assert fc.EVENTS == [("start", "alpha"), ("stop", "alpha")]  # the second one started nothing
    # the second daemon leaves the first one's socket alone and does not call it a leftover
    assert not logged(caplog, "socket left under root dir after stop", path="alpha.sock")


def test_metrics_port_in_use(tmp_path, caplog):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        d = make_daemon(tmp_path, (f"{M}:alpha",))
        d.config = d.config.replace("daemon", metrics_address=f"127.0.0.1:{busy.getsockname()[1]}")
        code, _ = run_daemon(d)
    finally:
        busy.close()
    assert code == EXIT_FAILED
    assert logged(caplog, "cannot start", error="cannot listen on metrics_address 127.0.0.1:")
    assert logged(caplog, "cannot start", error="Address already in use")


# --- root dir and mode -------------------------------------------------------------------


def test_prepare_root_layout_and_modes(tmp_path):
    root = tmp_path / "a" / "b"
    old = os.umask(0o077)
    try:
        created = prepare_root(root)
    finally:
        os.umask(old)
    assert created[0] == root and len(created) == 1 + len(ROOT_LAYOUT)
    assert stat.S_IMODE(root.stat().st_mode) == 0o711  # passed by all, listed by root (issue 32 item 7)
    for d in ROOT_LAYOUT:
        assert stat.S_IMODE((root / d).stat().st_mode) == 0o750
    # idempotent, and an operator's chosen mode is kept
    os.chmod(root / "cpu", 0o700)
    assert prepare_root(root) == []
    assert stat.S_IMODE((root / "cpu").stat().st_mode) == 0o700


def test_prepare_root_refuses_unsafe_roots(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(DaemonError, match="exists and is not a directory"):
        prepare_root(tmp_path / "file")
    open_root = tmp_path / "open"
    open_root.mkdir()
    os.chmod(open_root, 0o777)
    with pytest.raises(DaemonError, match="writable by everyone"):
        prepare_root(open_root)
    os.chmod(open_root, 0o1777)  # sticky like /tmp: strangers cannot replace our files
    prepare_root(open_root)


def test_pidfile_lock(tmp_path):
    a, b = PidFile(tmp_path / "x.pid"), PidFile(tmp_path / "x.pid")
    a.acquire()
    assert (tmp_path / "x.pid").read_text() == f"{os.getpid()}\n"
    with pytest.raises(DaemonError, match=f"another hwagent \\(pid {os.getpid()}\\)"):
        b.acquire()
    a.release()
    assert not (tmp_path / "x.pid").exists()
    b.acquire()
    b.release()


def test_resolve_mode(tmp_path):
    kubelet = tmp_path / "kubelet"
    cfg = DaemonConfig(kubelet_root_dir=str(kubelet))
    mode, why = resolve_mode(cfg)
    assert mode == "standalone" and "no kubelet registration socket" in why
    (kubelet / "device-plugins").mkdir(parents=True)
    sock_path = kubelet / "device-plugins" / "kubelet.sock"
    sock_path.write_text("")
    assert resolve_mode(cfg) == ("standalone", f"{sock_path} exists but is not a socket")
    sock_path.unlink()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(sock_path))
    try:
        assert resolve_mode(cfg) == ("kubelet", f"kubelet registration socket found at {sock_path}")
        # an explicit mode wins over detection
        forced = DaemonConfig(kubelet_root_dir=str(kubelet), mode="standalone")
        assert resolve_mode(forced)[0] == "standalone"
    finally:
        s.close()


def test_healthz_lists_readiness_and_a_warming_component_does_not_hold_ready(tmp_path):
    """READY=1 and a healthy /healthz come before a component's background set-up ends."""
    d = make_daemon(tmp_path, (f"{M}:alpha", f"{M}:warming"))
    fc.Warming.warm = False

    def probe(d):
        first = http_get(d, "/healthz")
        fc.Warming.warm = True
        return first, http_get(d, "/healthz")

    try:
        code, (loading, warm) = run_daemon(d, probe)
    finally:
        fc.Warming.warm = False
    assert code == EXIT_OK
    assert loading == (200, "ok\nalpha: healthy, ready\nwarming: healthy, not ready: loading tables\n")
    assert warm == (200, "ok\nalpha: healthy, ready\nwarming: healthy, ready: warm\n")


def test_a_second_daemon_managing_the_same_subtree_exits_2_naming_the_first(tmp_path, caplog):
    """Another root dir, the same lock dir and (default) subtrees: refused before any component starts."""
    first = make_daemon(tmp_path / "a", (f"{M}:alpha",), lock_dir=str(tmp_path / "locks"))

    def second_run(_):
        second = make_daemon(tmp_path / "b", (f"{M}:beta",), lock_dir=str(tmp_path / "locks"))
        return asyncio.run(second.run())

    code, second_code = run_daemon(first, second_run)
    assert code == EXIT_OK and second_code == EXIT_CONFIG
    assert fc.EVENTS == [("start", "alpha"), ("stop", "alpha")]  # beta never started
    assert logged(caplog, "cannot start", error=f"another hwagent (pid {os.getpid()}, root dir {tmp_path / 'a' / 'root'})")
