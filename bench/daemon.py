"""Daemon benchmark: scrape cost of the loop-served /metrics, and time to READY.

1. Scrape latency: hwagent's /metrics (asyncio, on a loop in this process)
   against prometheus_client's own ``start_http_server`` (a threaded WSGI
   server) serving the same default registry, with 500 extra labelled series
   so the body is realistic. Requests alternate between the two, same client,
   same process; medians and p99 of whole HTTP round trips.
2. Start to READY=1: ``hwagent run`` with no components and with the built-in
   COMPONENTS, against a floor: a bare interpreter that sends READY=1 itself.
   Each measured as spawn -> READY datagram on a notify socket, then SIGTERM.
   At READY the process is stopped (SIGSTOP) while its CPU time is read: every
   thread's run time (/proc/PID/task/*/schedstat, ns), its reaped children's
   (cutime + cstime) and its live descendants'; CPU time is the figure to
   judge on a loaded machine (issue 24's goal: <= 3x the floor), wall time
   counts the wait for a core. RSS is VmRSS at READY. With the built-in
   COMPONENTS also spawn -> probes attached (the pressure component compiles
   them in the background after READY): polled from
   ``hwagent_pressure_probes_state{state="running"}`` on /metrics.
   The children may write bytecode (PYTHONDONTWRITEBYTECODE is dropped for
   them): with it set every module edited since its .pyc was written is
   compiled again at each start, which an installed hwagent never does.

Run: scripts/dev bench daemon   (or .venv/bin/python bench/daemon.py [--quick])
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from prometheus_client import Gauge, start_http_server  # noqa: E402

from agent.daemon.metrics_http import HealthReport, MetricsServer  # noqa: E402


def _scrape(url: str) -> float:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as r:
        r.read()
    return time.perf_counter() - t


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def bench_scrape(n: int) -> None:
    g = Gauge("bench_series", "Series to make the body realistic.", ["id"])
    for i in range(500):
        g.labels(id=str(i)).set(i)

    loop = asyncio.new_event_loop()
    ready = threading.Event()
    server = MetricsServer("127.0.0.1", 0, lambda: HealthReport(True))

    def run_loop() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        ready.set()
        loop.run_forever()

    t = threading.Thread(target=run_loop, daemon=True)
    t.start()
    ready.wait()
    ours = f"{server.url}/metrics"

    peer_sock = socket.socket()
    peer_sock.bind(("127.0.0.1", 0))
    port = peer_sock.getsockname()[1]
    peer_sock.close()
    httpd, _thread = start_http_server(port, addr="127.0.0.1")
    peer = f"http://127.0.0.1:{port}/metrics"

    with urllib.request.urlopen(ours) as r:
        size = len(r.read())
    for _ in range(20):  # warm both
        _scrape(ours)
        _scrape(peer)
    a, b = [], []
    for _ in range(n):
        a.append(_scrape(ours))
        b.append(_scrape(peer))
    httpd.shutdown()
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)

    ma, mb = statistics.median(a), statistics.median(b)
    print(f"scrape: {n} requests each, body {size} bytes")
    print(f"  hwagent asyncio /metrics        p50 {ma * 1e3:7.3f} ms  p99 {_pct(a, 0.99) * 1e3:7.3f} ms")
    print(f"  prometheus_client http server   p50 {mb * 1e3:7.3f} ms  p99 {_pct(b, 0.99) * 1e3:7.3f} ms")
    print(f"  ratio hwagent/prometheus_client p50: {ma / mb:.2f}x")


def _probes_running(metrics_url: str) -> bool:
    with urllib.request.urlopen(metrics_url, timeout=30) as r:
        return 'hwagent_pressure_probes_state{state="running"} 1.0' in r.read().decode()


_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the command name (which may hold spaces): field 3 onwards."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def _threads_ms(pid: int) -> float:
    """Run time of every thread of ``pid`` so far (schedstat: ns, not the stat file's 10 ms ticks)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:  # the thread ended meanwhile: its time is in the process's
            continue
    return total / 1e6


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                children.setdefault(int(_stat_fields(int(name))[1]), []).append(int(name))
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def tree_cpu_ms(pid: int) -> float:
    """CPU time of ``pid`` so far: its threads, its reaped children, and its live descendants."""
    f = _stat_fields(pid)
    total = _threads_ms(pid) + (int(f[13]) + int(f[14])) * _TICK_MS  # cutime + cstime
    for child in _descendants(pid):
        try:
            total += _threads_ms(child)
        except FileNotFoundError:
            continue
    return total


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


#: what a start to READY measured: wall seconds, CPU ms (whole process tree), RSS MB
Ready = tuple[float, float, float]


def _time_to_ready(cmd: list[str], env_extra: dict[str, str], probes: list[float] | None = None) -> Ready:
    d = tempfile.mkdtemp(prefix="hwb-", dir="/tmp")
    path = os.path.join(d, "notify")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(120)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(NOTIFY_SOCKET=path, **env_extra)
    root = os.path.join(d, "root")
    full = [c.replace("{root}", root) for c in cmd]
    t = time.perf_counter()
    proc = subprocess.Popen(full, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        msg = b""
        while b"READY=1" not in msg:
            msg = s.recv(65536)
        elapsed = time.perf_counter() - t
        os.kill(proc.pid, signal.SIGSTOP)  # what it did up to READY, not what it goes on doing
        try:
            cpu, rss = tree_cpu_ms(proc.pid), rss_mb(proc.pid)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        if probes is not None:
            status = dict(line.split("=", 1) for line in msg.decode().split("\n") if "=" in line).get("STATUS", "")
            url = next(w.split("=", 1)[1] for w in status.split() if w.startswith("metrics="))
            while not _probes_running(url):
                if time.perf_counter() - t > 120:
                    raise SystemExit("probes not attached after 120 s")
                time.sleep(0.02)
            probes.append(time.perf_counter() - t)
        proc.send_signal(signal.SIGTERM)
        if proc.wait(60) != 0:
            raise SystemExit(f"{full[:3]} exited {proc.returncode}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        s.close()
        subprocess.run(["rm", "-rf", d], check=False)
    return elapsed, cpu, rss


def bench_startup(rounds: int) -> None:
    py = sys.executable
    floor = [py, "-c", "import os, signal, socket; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM});"
             "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto(b'READY=1', os.environ['NOTIFY_SOCKET']);"
             "signal.sigwait({signal.SIGTERM})"]
    run = ["run", "--root-dir", "{root}", "--metrics-address", "127.0.0.1:0", "--mode", "standalone"]
    bare = [py, "-c", "import sys, agent.daemon.daemon as d; d.COMPONENTS = (); from agent.cli import main;"
            "sys.exit(main(sys.argv[1:]))", *run]
    full = [str(Path(py).parent / "hwagent"), *run]
    runs: dict[str, list[Ready]] = {"floor": [], "bare": [], "full": []}
    probes: list[float] = []
    _time_to_ready(full, {})  # once unmeasured: bytecode written, page cache warm
    for _ in range(rounds):  # interleaved, so load on the shared machine hits all three alike
        runs["floor"].append(_time_to_ready(floor, {}))
        runs["bare"].append(_time_to_ready(bare, {}))
        runs["full"].append(_time_to_ready(full, {}, probes))
    med = {k: tuple(statistics.median(r[i] for r in v) for i in range(3)) for k, v in runs.items()}
    f, b, c = med["floor"], med["bare"], med["full"]
    p = statistics.median(probes)
    print(f"start to READY=1: median of {rounds} rounds; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")
    print(f"  {'':42} {'CPU ms':>8} {'x floor':>8} {'wall ms':>8} {'x floor':>8} {'RSS MB':>7}")
    for label, m in (("floor: python sends READY itself", f), ("hwagent run, no components", b),
                     ("hwagent run, built-in COMPONENTS", c)):
        print(f"  {label:42} {m[1]:>8.1f} {m[1] / f[1]:>7.2f}x {m[0] * 1e3:>8.1f} {m[0] / f[0]:>7.2f}x {m[2]:>7.1f}")
    print(f"  ... and its probes attached (background), wall {p * 1e3:8.1f} ms ({p / f[0]:.2f}x floor)")
    print(f"goal READY with all components <= 3x the floor's CPU time: {c[1] / f[1]:.2f}x "
          f"({c[1]:.1f} ms against {f[1]:.1f} ms); {'met' if c[1] <= 3 * f[1] else 'NOT met'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests and rounds")
    args = ap.parse_args()
    bench_scrape(100 if args.quick else 500)
    bench_startup(1 if args.quick else 3)


if __name__ == "__main__":
    main()
