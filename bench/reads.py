"""The read commands' cost, before and after a change: ``ps``, ``status``, ``cpus``, ``memory`` and
``resources`` of two client checkouts against one daemon, interleaved round by round.

bench/cli.py's method: one real daemon (``hwagent run``, standalone, in a cpuacct cgroup of the
bench's own, with ``--pods`` sleeping pods launched first), and per call the client's CPU
(``getrusage(RUSAGE_CHILDREN)``, utime + stime), the daemon's (its cgroup's cpuacct usage: every
thread, and whatever it forks) and the wall time; ``python -S -c pass`` (the entry script's floor)
measured in the same rounds, and the load average printed. ``--before DIR`` is a second checkout
with its own entry script at ``DIR/hwagent`` (written by ``python -c "from agent.commands._entry
import write; ..."``, see the docstring of main), e.g. ``git archive HEAD | tar -x -C /tmp/before``
taken before the change: both clients ask the same daemon (the status service is served on
gRPC and HTTP, the CLI's socket is unchanged), so the daemon's state is the same for both, and
their outputs are compared byte for byte (``status``'s uptime masked: it moves between calls).

Run: .venv/bin/python bench/reads.py --before /tmp/before [--rounds 20] [--pods 10]
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cli import HWAGENT, PY, REPO, Hwagent, measure, pct  # noqa: E402

READS = (("ps",), ("status",), ("cpus",), ("memory",), ("resources",))
#: what each output is compared on: every read command in both formats
COMPARED = tuple((*r, *f) for r in READS for f in ((), ("--format", "json")))
_UPTIME = re.compile(r'(up: \d+s|"uptime_seconds": [0-9.e"+-]+)')


def client(entry: str, root: Path, argv: tuple[str, ...], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([entry, argv[0], "--root-dir", str(root), *argv[1:]], capture_output=True, cwd=cwd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="a checkout from before the change, with its entry script")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--pods", type=int, default=10)
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("reads bench: needs root (the daemon; cpuacct cgroups)")
    before = str(Path(a.before) / "hwagent")
    for src in (REPO / "agent", Path(a.before) / "agent"):
        compileall.compile_dir(str(src), quiet=1)
    base = Path(tempfile.mkdtemp(prefix="hwagent-bench-reads-"))
    hw: Hwagent | None = None
    try:
        hw = Hwagent(base / "hwagent")
        for i in range(a.pods):
            hw.client(["launch", "--name", f"p{i}", "--", "sleep", "3600"])
        hw.client(["ps"])
        same = {}
        for argv in COMPARED:
            outs = [client(e, hw.root, argv, hw.base) for e in (before, HWAGENT)]
            texts = [_UPTIME.sub("UPTIME", o.stdout.decode()) for o in outs]
            same[" ".join(argv)] = (texts[0] == texts[1] and outs[0].returncode == outs[1].returncode == 0,
                                    outs[1].returncode, outs[1].stderr.decode()[-200:])
        ops = {"python -S -c pass": (lambda: subprocess.run([PY, "-S", "-c", "pass"], check=True), None)}
        for argv in READS:
            for tag, entry in (("before", before), ("after", HWAGENT)):
                def op(entry: str = entry, argv: tuple[str, ...] = argv) -> None:
                    r = client(entry, hw.root, argv, hw.base)  # type: ignore[union-attr]
                    if r.returncode != 0:
                        raise SystemExit(f"reads bench: {entry} {' '.join(argv)}: {r.stderr.decode()[-300:]}")
                ops[f"{' '.join(argv)} ({tag})"] = (op, hw.acct)
        for op, acct in ops.values():
            measure(op, acct)
        res: dict[str, list[tuple[float, float, float]]] = {k: [] for k in ops}
        load0 = open("/proc/loadavg").read().split()[:3]
        for _ in range(a.rounds):
            for name, (op, acct) in ops.items():
                res[name].append(measure(op, acct))
        load1 = open("/proc/loadavg").read().split()[:3]
    finally:
        if hw is not None:
            hw.client(["rm", "-f", *(f"p{i}" for i in range(a.pods))], check=False)  # the pods end with the bench
            hw.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(f"read commands, {a.rounds} interleaved rounds, {a.pods} pods; load average {' '.join(load0)} -> "
          f"{' '.join(load1)} on {os.cpu_count()} CPUs")
    print(f"  {'':24s} {'client CPU':>10s} {'daemon CPU':>10s} {'total p50':>10s} {'total p95':>10s} "
          f"{'wall p50':>9s} {'wall p95':>9s}")
    for name, xs in res.items():
        tot = [(x[1] + x[2]) * 1e3 for x in xs]
        walls = [x[0] * 1e3 for x in xs]
        print(f"  {name:24s} {statistics.median(x[1] for x in xs) * 1e3:8.1f}ms "
              f"{statistics.median(x[2] for x in xs) * 1e3:8.1f}ms {pct(tot, 0.5):8.1f}ms {pct(tot, 0.95):8.1f}ms "
              f"{pct(walls, 0.5):7.1f}ms {pct(walls, 0.95):7.1f}ms")
    print("  outputs before == after (same daemon, same state):")
    for k, (ok, rc, err) in same.items():
        print(f"    {k:32s} {'identical' if ok else f'DIFFERENT (rc {rc}) {err}'}")


if __name__ == "__main__":
    main()
