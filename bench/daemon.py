"""Daemon benchmark: scrape cost of the loop-served /metrics, and time to READY.

1. Scrape latency: hwagent's /metrics (asyncio, on a loop in this process)
   against prometheus_client's own ``start_http_server`` (a threaded WSGI
   server) serving the same default registry, with 500 extra labelled series
   so the body is realistic. Requests alternate between the two, same client,
   same process; medians and p99 of whole HTTP round trips.
2. Start to READY=1: ``hwagent run`` with no components and with the built-in
   COMPONENTS, against a floor: a bare interpreter that sends READY=1 itself.
   Each measured as spawn -> READY datagram on a notify socket, then SIGTERM.
   With the built-in COMPONENTS also spawn -> probes attached (the pressure
   component compiles them in the background after READY): polled from
   ``hwagent_pressure_probes_state{state="running"}`` on /metrics.

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


def _time_to_ready(cmd: list[str], env_extra: dict[str, str], probes: list[float] | None = None) -> float:
    d = tempfile.mkdtemp(prefix="hwb-", dir="/tmp")
    path = os.path.join(d, "notify")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(120)
    env = dict(os.environ, NOTIFY_SOCKET=path, **env_extra)
    root = os.path.join(d, "root")
    full = [c.replace("{root}", root) for c in cmd]
    t = time.perf_counter()
    proc = subprocess.Popen(full, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        msg = b""
        while b"READY=1" not in msg:
            msg = s.recv(65536)
        elapsed = time.perf_counter() - t
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
    return elapsed


def bench_startup(rounds: int) -> None:
    py = sys.executable
    floor = [py, "-c", "import os, signal, socket; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM});"
             "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto(b'READY=1', os.environ['NOTIFY_SOCKET']);"
             "signal.sigwait({signal.SIGTERM})"]
    run = ["run", "--root-dir", "{root}", "--metrics-address", "127.0.0.1:0", "--mode", "standalone"]
    bare = [py, "-c", "import sys, agent.daemon.daemon as d; d.COMPONENTS = (); from agent.cli import main;"
            "sys.exit(main(sys.argv[1:]))", *run]
    full = [str(Path(py).parent / "hwagent"), *run]
    results: dict[str, list[float]] = {"floor": [], "bare": [], "full": [], "probes": []}
    for _ in range(rounds):  # interleaved, so load on the shared machine hits all three alike
        results["floor"].append(_time_to_ready(floor, {}))
        results["bare"].append(_time_to_ready(bare, {}))
        results["full"].append(_time_to_ready(full, {}, results["probes"]))
    f, b, c, p = (statistics.median(results[k]) for k in ("floor", "bare", "full", "probes"))
    print(f"start to READY=1: median of {rounds} rounds")
    print(f"  floor: python sends READY itself          {f * 1e3:8.1f} ms")
    print(f"  hwagent run, no components                {b * 1e3:8.1f} ms  ({b / f:.2f}x floor)")
    print(f"  hwagent run, built-in COMPONENTS          {c * 1e3:8.1f} ms  ({c / f:.2f}x floor)")
    print(f"  ... and its probes attached (background)  {p * 1e3:8.1f} ms  ({p / f:.2f}x floor)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests and rounds")
    args = ap.parse_args()
    bench_scrape(100 if args.quick else 500)
    bench_startup(1 if args.quick else 3)


if __name__ == "__main__":
    main()
