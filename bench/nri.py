"""NRI benchmark: hwagent as containerd's NRI plugin, against the floor of the protocol.

Two parts, each with every plugin measured in the same run:

1. **CreateContainer round trip** (event in, adjustment out). The runtime side
   is containerd's own NRI code: ``nripeer drive`` (tests/peer/nri, our Go
   program built inside containerd 2.x's vendored tree) runs NRI's
   ``pkg/adaptation``, the package containerd calls its plugins with, on a
   private socket. The plugin that connects is synchronized with N running
   Burstable containers (N = 10 and 1,000: the node as ``Synchronize`` tells
   it, as containerd does for a plugin that registers on a busy node), then
   rounds of 10 pods are run, their 10 CreateContainer calls timed one by one,
   then started, stopped and removed (so the plugin knows N..N+10 containers
   while timed). CPU: on-CPU time of every thread (``/proc/PID/task/*/schedstat``,
   the utime+stime total at ns resolution) of the plugin and of the runtime side
   during the timed calls only, per call. Plugins:

   - ``hwagent``: the daemon (``hwagent run --mode standalone`` with ``[nri]
     enabled``: the CPU policy, memory manager and topology manager decide);
     ``--hwagent module`` runs ``python -m agent.nri.plugin`` alone instead;
   - ``floor-go``: ``nripeer floor``, NRI's own Go plugin stub subscribed to
     the same events, answering every CreateContainer with the adjustment hwagent
     answered most (its cpuset CPUs and memory nodes), deciding nothing;
   - ``floor-py``: bench/nri_floor/floor.py, the same over hwagent's own ttrpc
     and multiplexer (the protocol's cost in Python);
   - ``hwagent-tmpfs``: the daemon again with its state dir on /dev/shm, so the
     disk's fsync (behind the answer since Placer.answer, still the daemon's CPU) is told apart.

   A plugin whose Synchronize the runtime times out (2 s, as containerd) is
   dropped, as containerd drops it; the row says so (DROPPED) and is timed from
   the plugin's reconnection that synchronized.

   ``--load N`` repeats hwagent's 1,000-container row with N CPU hogs running
   (the runtime times a plugin out after 2 s).

2. **Pod start through the CRI**: a private containerd with NRI on (1.7 from
   PATH, or ``--containerd PATH`` e.g. the 2.x that tests/peer/nri/build.sh
   builds), the tests' CRI client and static pause image; RunPodSandbox +
   CreateContainer + StartContainer of a host-network Burstable pod, timed per
   pod, with no plugin, the Go floor, and hwagent registered, interleaved by
   blocks. CPU: containerd (with the shims and runc it forks) and the plugin,
   each in a cpuacct cgroup of the bench's own.

The load average is printed before and after; a loaded machine inflates
everything, the ratios are what to compare.

Needs root, containerd >= 1.7, gcc and ctr (part 2), and nripeer (both parts:
``tests/peer/nri/build.sh <containerd git dir> <go> /tmp/nri-peer-build``); without
nripeer part 1 is skipped with the reason and part 2 uses the Python floor.

Run: .venv/bin/python bench/nri.py [--quick] [--peer /tmp/nri-peer-build/bin]
     [--containerd PATH] [--load 2] [--hwagent daemon|module] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.cli import Acct  # noqa: E402

PY = sys.executable
HWAGENT = str(Path(PY).parent / "hwagent")
FLOOR_PY = REPO / "bench" / "nri_floor" / "floor.py"
DEFAULT_PEER = Path("/tmp/nri-peer-build/bin")

DAEMON_CONFIG = """
[pressure]
enabled = false
[devices]
default_rules = false
hotplug = false
[cgroups]
runtime_subtree = "{subtree}/pods"
[nri]
enabled = true
socket_path = "{socket}"
reconnect_interval_s = 0.1
"""


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def pct(xs: list[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..1)."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


# --- plugins ---------------------------------------------------------------------------


@dataclass
class Plugin:
    """One plugin process (hwagent's daemon or plugin alone, or a floor) on ``socket``."""

    kind: str
    socket: Path
    base: Path
    adjustment: tuple[str, str] = ("", "")  # the floors' answer: cpus, mems
    hwagent: str = "daemon"
    peer: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    subtree: str = ""
    cleanup: list[Path] = field(default_factory=list)
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.base / f"{self.kind}.{uuid.uuid4().hex[:6]}.log"

    @property
    def name(self) -> str:
        """The name the plugin registers under (the runtime logs "90-<name>")."""
        return {"floor-go": "floor", "floor-py": "pyfloor"}.get(self.kind, "hwagent")

    def argv(self) -> list[str]:
        cpus, mems = self.adjustment
        if self.kind == "floor-go":
            assert self.peer is not None
            return [str(self.peer / "nripeer"), "floor", "--socket", str(self.socket), "--cpus", cpus, "--mems", mems]
        if self.kind == "floor-py":
            return [PY, str(FLOOR_PY), "--socket", str(self.socket), "--cpus", cpus, "--mems", mems]
        if self.hwagent == "module":
            return [PY, "-m", "agent.nri.plugin", "--socket", str(self.socket), "--reconnect-interval", "0.1"]
        # hwagent-tmpfs: its state (the journal, made durable behind the answer) on tmpfs, to
        # tell the disk's fsync apart from the rest
        under = Path(tempfile.mkdtemp(prefix="hwagent-bench-nri-", dir="/dev/shm")) if self.kind == "hwagent-tmpfs" \
            else self.base
        root = under / f"hw-{uuid.uuid4().hex[:6]}"
        root.mkdir()
        self.cleanup.append(under if under != self.base else root)
        cfg = root / "hw.toml"
        cfg.write_text(DAEMON_CONFIG.format(subtree=self.subtree, socket=self.socket))
        return [HWAGENT, "run", "--config", str(cfg), "--root-dir", str(root / "root"), "--mode", "standalone",
                "--metrics-address", "127.0.0.1:0", "--lock-dir", str(root / "locks")]

    def start(self, acct: Acct | None = None) -> int:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(self.argv(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=REPO, start_new_session=True)
        if acct is not None:
            (acct.path / "cgroup.procs").write_text(str(self.proc.pid))
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for d in self.cleanup:
            shutil.rmtree(d, ignore_errors=True)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]


@contextmanager
def hogs(n: int) -> Iterator[None]:
    """``n`` busy loops (the machine under load), stopped on exit."""
    procs = [subprocess.Popen([PY, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5 if n else 0)
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


# --- part 1: the round trip --------------------------------------------------------------


def round_trip(peer: Path, plugin: Plugin, known: int, rounds: int, batch: int) -> dict[str, Any]:
    """One ``nripeer drive`` run with ``plugin`` connected; the driver's JSON."""
    plugin.socket.unlink(missing_ok=True)
    pid_file = plugin.base / "plugin.pid"
    pid_file.unlink(missing_ok=True)
    drive = subprocess.Popen([str(peer / "nripeer"), "drive", "--socket", str(plugin.socket), "--known", str(known),
                              "--rounds", str(rounds), "--batch", str(batch), "--plugin-pid-file", str(pid_file)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=plugin.base)
    try:
        deadline = time.monotonic() + 20
        while not plugin.socket.is_socket():
            if drive.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"nri bench: nripeer drive did not listen: {drive.stderr.read().decode()[-2000:]}"
                                 if drive.stderr else "nri bench: nripeer drive did not listen")
            time.sleep(0.02)
        pid_file.write_text(str(plugin.start()))
        out, err = drive.communicate(timeout=300)
    finally:
        if drive.poll() is None:
            drive.kill()
            drive.wait()
        plugin.stop()
    if drive.returncode != 0:
        raise SystemExit(f"nri bench: nripeer drive exited {drive.returncode}: {err.decode()[-1500:]}\n"
                         f"plugin {plugin.kind} log:\n{plugin.tail()}")
    res: dict[str, Any] = json.loads(out)
    res["plugin"] = plugin.kind
    return res


def most_common_cpuset(res: dict[str, Any]) -> tuple[str, str]:
    """(cpus, mems) of the adjustment hwagent answered most, for the floors to answer the same."""
    if not res["adjustments"]:
        return "", ""
    words = dict(w.split("=", 1) for w in Counter(res["adjustments"]).most_common(1)[0][0].split() if "=" in w)
    return words.get("cpus", ""), words.get("mems", "")


def row(res: dict[str, Any]) -> dict[str, float]:
    us = res["round_trip_us"]
    n = len(us)
    return {"p50": pct(us, 0.5), "p99": pct(us, 0.99), "max": max(us),
            "plugin_cpu_us": res["plugin_cpu_ns"] / 1e3 / n, "runtime_cpu_us": res["runtime_cpu_ns"] / 1e3 / n,
            "wall_us": res["create_wall_ns"] / 1e3 / n, "sync_ms": res["sync_ms"]}


def part_round_trip(a: argparse.Namespace, base: Path, out: dict[str, Any]) -> None:
    peer: Path = a.peer
    if not (peer / "nripeer").is_file():
        print(f"round trip: skipped: no {peer / 'nripeer'} (tests/peer/nri/build.sh builds it; needs Go)")
        return
    rounds = 5 if a.quick else 20
    acct = Acct(f"hwagent-bench-nri-{os.getpid()}")
    try:
        print(f"CreateContainer round trip through containerd's NRI adaptation (nripeer drive), "
              f"{rounds} x 10 timed calls per row; loadavg {loadavg()}")
        print(f"{'plugin':<22}{'known':>6}{'p50 µs':>9}{'p99 µs':>9}{'max µs':>9}{'plugin CPU':>12}"
              f"{'runtime CPU':>13}{'sync ms':>9}  adjustment")
        for known in (10, 1000):
            sock = base / f"rt-{known}.sock"
            hw = Plugin("hwagent", sock, base, hwagent=a.hwagent, subtree="/" + acct.path.name)
            res = {"hwagent": round_trip(peer, hw, known, rounds, 10)}
            adj = most_common_cpuset(res["hwagent"])
            for kind in ("floor-go", "floor-py"):
                res[kind] = round_trip(peer, Plugin(kind, sock, base, adjustment=adj, peer=peer), known, rounds, 10)
            if a.hwagent == "daemon":
                res["hwagent-tmpfs"] = round_trip(peer, Plugin("hwagent-tmpfs", sock, base,
                                                               subtree="/" + acct.path.name), known, rounds, 10)
            if a.load and known == 1000:
                with hogs(a.load):
                    res[f"hwagent+{a.load} hogs"] = round_trip(
                        peer, Plugin("hwagent", sock, base, hwagent=a.hwagent, subtree="/" + acct.path.name),
                        known, rounds, 10)
            for kind, r in res.items():
                x = row(r)
                errs = f"  ERRORS {r['errors'][:2]}" if r["errors"] else ""
                if r["sync_failures"]:
                    errs += (f"  DROPPED by the runtime {len(r['sync_failures'])}x before a Synchronize passed "
                             f"(first: {r['sync_failures'][0]})")
                print(f"{kind:<22}{known:>6}{x['p50']:>9.0f}{x['p99']:>9.0f}{x['max']:>9.0f}"
                      f"{x['plugin_cpu_us']:>9.0f} µs{x['runtime_cpu_us']:>10.0f} µs{x['sync_ms']:>9.1f}  "
                      f"{', '.join(f'{k} x{v}' for k, v in r['adjustments'].items())}{errs}")
                out.setdefault("round_trip", {}).setdefault(str(known), {})[kind] = {**x, "n": len(r["round_trip_us"]),
                                                                                       "adjustments": r["adjustments"],
                                                                                       "errors": r["errors"],
                                                                                       "sync_failures": r["sync_failures"]}
            h, g, p = row(res["hwagent"]), row(res["floor-go"]), row(res["floor-py"])
            print(f"  ratios at {known}: p99 hwagent/floor-go {h['p99'] / g['p99']:.2f}x, "
                  f"hwagent/floor-py {h['p99'] / p['p99']:.2f}x; p50 hwagent/floor-go {h['p50'] / g['p50']:.2f}x; "
                  f"plugin CPU hwagent/floor-go {h['plugin_cpu_us'] / max(g['plugin_cpu_us'], 1e-9):.2f}x "
                  f"(goal p99 <= 2x the floor)")
        print(f"  loadavg after {loadavg()}")
    finally:
        from bench.cli import remove_subtree
        remove_subtree(acct)


# --- part 2: pod start through the CRI -------------------------------------------------------


def part_pod_start(a: argparse.Namespace, base: Path, out: dict[str, Any]) -> None:
    from tests.integration.nri.containerd import Containerd, containerd_version, skip_reason
    from tests.integration.nri.cri import CriClient
    from tests.integration.nri.image import build_pause_archive

    if a.containerd:
        os.environ["HWAGENT_CONTAINERD"] = a.containerd
    why = skip_reason() or (None if shutil.which("gcc") else "needs gcc (the pause image)")
    if why:
        print(f"pod start: skipped: {why}")
        return
    pods_per_block = 4 if a.quick else 8
    blocks = 1 if a.quick else 3
    work = base / "ctd"
    work.mkdir()
    ctd = Containerd(work)
    version = ".".join(map(str, containerd_version(ctd.binary) or ()))
    acct_c = Acct(f"hwagent-bench-nri-ctd-{os.getpid()}")
    acct_p = Acct(f"hwagent-bench-nri-plugin-{os.getpid()}")
    parent = f"/hwagent-bench-nri-{uuid.uuid4().hex[:8]}"
    floor_kind = "floor-go" if (a.peer / "nripeer").is_file() else "floor-py"
    cri: CriClient | None = None
    running: list[Plugin] = []
    times: dict[str, list[float]] = {"none": [], floor_kind: [], "hwagent": []}
    cpu: dict[str, list[float]] = {k: [0.0, 0.0] for k in times}  # containerd, plugin
    adj: tuple[str, str] = ("", "")
    try:
        archive = build_pause_archive(work)
        ctd.start()
        (acct_c.path / "cgroup.procs").write_text(str(ctd.proc.pid if ctd.proc else 0))
        ctd.ctr("images", "import", str(archive))
        cri = CriClient(ctd.cri_socket)
        n = 0
        print(f"\npod start through the CRI (containerd {version} at {ctd.binary}), {blocks} x {pods_per_block} "
              f"pods per plugin, interleaved; loadavg {loadavg()}")
        order = ["none", "hwagent", floor_kind]
        for b in range(blocks):
            for kind in order[b % 3:] + order[:b % 3]:  # each block starts with another plugin
                plugin = None
                if kind != "none":
                    plugin = Plugin(kind, ctd.nri_socket, base, hwagent=a.hwagent, adjustment=adj, peer=a.peer,
                                    subtree="/" + acct_p.path.name)
                    seen = _connected(ctd.log_text(), plugin.name)
                    running.append(plugin)
                    plugin.start(acct_p)
                    _wait_connected(ctd, plugin, seen)
                c0, p0 = acct_c.seconds(), acct_p.seconds()
                ids = _start_pods(cri, n, pods_per_block, parent, work / "logs", times[kind])
                n += pods_per_block
                cpu[kind][0] += acct_c.seconds() - c0
                cpu[kind][1] += acct_p.seconds() - p0
                if kind == "hwagent" and ids:
                    adj = _cpuset_of(cri.container_pid(ids[0][1]))
                for pod_id, _ in ids:
                    cri.remove_pod(pod_id)
                if plugin is not None:
                    plugin.stop()
        res = _pod_start_report(times, cpu, floor_kind, adj)
        out["pod_start"] = {"containerd": version, "binary": ctd.binary, **res}
    finally:
        if cri is not None:
            for pod_id in cri.pod_ids():
                cri.remove_pod(pod_id)
            cri.close()
        for p in running:
            p.stop()
        ctd.stop()
        from bench.cli import remove_subtree
        from tests.cgroup_support import rmdir_cgroup_tree
        for h in Path("/sys/fs/cgroup").iterdir():
            d = h / parent.lstrip("/")
            if d.is_dir():
                rmdir_cgroup_tree(d)
        remove_subtree(acct_p)
        acct_c.remove()


def _start_pods(cri: Any, n0: int, count: int, parent: str, log_dir: Path, times: list[float]) -> list[tuple[str, str]]:
    """``count`` Burstable host-network pods, each RunPodSandbox + CreateContainer + StartContainer
    timed as one (appended to ``times``); their (pod id, container id)."""
    from tests.integration.nri.image import IMAGE

    ids = []
    for n in range(n0 + 1, n0 + count + 1):
        began = time.monotonic()
        pod = cri.run_pod(f"bench-{n}", "bench", f"uid-bench-{n}", cgroup_parent=parent, log_dir=log_dir)
        cid = cri.create_container(pod, "main", IMAGE, cpu_shares=256, memory_limit=128 << 20)
        cri.start_container(cid)
        times.append(time.monotonic() - began)
        ids.append((pod.id, cid))
    return ids


def _pod_start_report(times: dict[str, list[float]], cpu: dict[str, list[float]], floor_kind: str,
                      adj: tuple[str, str]) -> dict[str, Any]:
    res: dict[str, Any] = {}
    print(f"{'plugin':<10}{'pods':>5}{'p50 ms':>9}{'p90 ms':>9}{'mean ms':>9}{'containerd CPU':>16}{'plugin CPU':>12}")
    for kind, ts in times.items():
        k = len(ts)
        res[kind] = r = {"n": k, "p50_ms": pct(ts, 0.5) * 1e3, "p90_ms": pct(ts, 0.9) * 1e3,
                         "mean_ms": statistics.fmean(ts) * 1e3, "containerd_cpu_ms": cpu[kind][0] / k * 1e3,
                         "plugin_cpu_ms": cpu[kind][1] / k * 1e3}
        print(f"{kind:<10}{k:>5}{r['p50_ms']:>9.1f}{r['p90_ms']:>9.1f}{r['mean_ms']:>9.1f}"
              f"{r['containerd_cpu_ms']:>13.1f} ms{r['plugin_cpu_ms']:>9.1f} ms")
    h, z, f = res["hwagent"], res["none"], res[floor_kind]
    print(f"  ratios: hwagent/none p50 {h['p50_ms'] / z['p50_ms']:.2f}x, mean {h['mean_ms'] / z['mean_ms']:.2f}x "
          f"(goal <= 1.1x); {floor_kind}/none p50 {f['p50_ms'] / z['p50_ms']:.2f}x; "
          f"hwagent's cpuset in the container: {adj[0] or '-'} mems {adj[1] or '-'}")

    def total(r: dict[str, Any]) -> float:
        return float(r["containerd_cpu_ms"] + r["plugin_cpu_ms"])

    print(f"  CPU per pod (containerd + shims + runc + plugin): hwagent/none {total(h) / total(z):.2f}x, "
          f"{floor_kind}/none {total(f) / total(z):.2f}x")
    print(f"  loadavg after {loadavg()}")
    return res


def _connected(log: str, name: str) -> int:
    """How often containerd has logged 'plugin "90-<name>" connected' (logfmt escapes the quotes)."""
    return len(re.findall(rf'plugin \\?"90-{re.escape(name)}\\?" connected', log))


def _wait_connected(ctd: Any, plugin: Plugin, seen: int, timeout: float = 60) -> None:
    """Until containerd logs one more 'plugin "<name>" connected' than ``seen``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _connected(ctd.log_text(), plugin.name) > seen:
            return
        if plugin.proc is not None and plugin.proc.poll() is not None:
            raise SystemExit(f"nri bench: {plugin.kind} exited {plugin.proc.returncode}:\n{plugin.tail()}")
        time.sleep(0.05)
    raise SystemExit(f"nri bench: {plugin.kind} did not connect to containerd in {timeout:.0f} s:\n{plugin.tail()}")


def _cpuset_of(pid: int) -> tuple[str, str]:
    """The container's CPUs and memory nodes as the kernel applies them."""
    status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)
    return status.get("Cpus_allowed_list", "").strip(), status.get("Mems_allowed_list", "").strip()


def main() -> None:
    ap = argparse.ArgumentParser(description="hwagent's NRI plugin against the floor of the protocol")
    ap.add_argument("--quick", action="store_true", help="fewer rounds and pods (a smoke run)")
    ap.add_argument("--peer", type=Path, default=DEFAULT_PEER, help="the dir with nripeer (tests/peer/nri/build.sh)")
    ap.add_argument("--containerd", help="the containerd for part 2 (default: PATH's; e.g. a 2.x build)")
    ap.add_argument("--load", type=int, default=0, metavar="N", help="also time hwagent with N CPU hogs running")
    ap.add_argument("--hwagent", choices=("daemon", "module"), default="daemon",
                    help="hwagent's daemon with [nri] enabled (default), or the plugin module alone")
    ap.add_argument("--part", choices=("all", "round-trip", "pod-start"), default="all")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("nri bench: needs root (containerd, cgroups)")
    out: dict[str, Any] = {"loadavg_before": loadavg(), "cpus": os.cpu_count()}
    base = Path(tempfile.mkdtemp(prefix="hwagent-bench-nri-", dir="/tmp"))
    try:
        if a.part in ("all", "round-trip"):
            part_round_trip(a, base, out)
        if a.part in ("all", "pod-start"):
            part_pod_start(a, base, out)
    finally:
        out["loadavg_after"] = loadavg()
        if a.json:
            a.json.write_text(json.dumps(out, indent=1))
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
