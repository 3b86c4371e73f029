"""`hwagent topology` as a process against lstopo as a process, on every hwloc snapshot.

Issue 24: the earlier bench set a warm in-process reading against a whole
lstopo process, which flattered hwagent 5-12x. Here both sides are processes
started the same way, and each is measured by its own CPU time (user + system
of the child, from ``os.wait4``'s rusage) beside its wall time; CPU time is
what to trust on a shared, loaded machine, wall time counts the wait for a core.
For every snapshot in tests/fixtures/hwloc-linux, the median of N runs of:

- ``hwagent topology --sysfs-root DIR/sys`` (text) against
  ``lstopo-no-graphics --if fsroot -i DIR --of console``,
- ``hwagent topology --format json`` against ``lstopo-no-graphics --if fsroot -i DIR --of xml``,

and two floors under any Python command: ``python -c pass`` with this
environment's site (an editable install adds its import finder) and
``python -I -S -c pass`` (the interpreter alone). The closing lines give the
goal (hwagent's CPU <= lstopo's on every snapshot), how many snapshots meet
it, and the worst ratio. Usage:

    .venv/bin/python bench/topology.py [--repeat 5] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "hwloc-linux"


#: the children may write their bytecode: with PYTHONDONTWRITEBYTECODE set (as in some dev
#: shells) every module edited since its .pyc was written is compiled again on every run,
#: which an installed hwagent never does
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


#: (wall ms, CPU ms)
Timing = tuple[float, float]


def run_once(cmd: list[str]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one run of ``cmd``: the child's own utime + stime, from wait4."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=CHILD_ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}")
    return wall * 1000, (usage.ru_utime + usage.ru_stime) * 1000


def median_run(cmd: list[str], n: int) -> tuple[float, float]:
    """(median wall ms, median CPU ms) over ``n`` runs after one to warm the page cache."""
    run_once(cmd)
    runs = [run_once(cmd) for _ in range(n)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def hwagent_cmd() -> list[str]:
    """The installed console script, as a user runs it."""
    script = Path(sys.executable).parent / "hwagent"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from agent.cli import main; sys.exit(main())"]


def snapshots(into: Path, only: list[str]) -> list[tuple[str, Path]]:
    """(name, extracted snapshot root) of every snapshot, or of those named."""
    out = []
    kwargs: dict[str, Any] = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
    for archive in sorted(FIXTURES.glob("*.tar.bz2")):
        name = archive.name.removesuffix(".tar.bz2")
        if only and name not in only:
            continue
        dest = into / name
        if not dest.exists():
            with tarfile.open(archive) as tf:
                tf.extractall(dest, **kwargs)
        (top,) = [p for p in dest.iterdir() if p.is_dir()]
        out.append((name, top))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5, help="runs per command, median taken (default 5)")
    ap.add_argument("--only", nargs="*", default=[], metavar="NAME", help="only these snapshots")
    ap.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "hwagent-bench-hwloc")
    args = ap.parse_args()
    lstopo = shutil.which("lstopo-no-graphics")
    if lstopo is None:
        print("lstopo-no-graphics not found (apt package hwloc); nothing to compare against", file=sys.stderr)
        return 2
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    hw = hwagent_cmd()
    load_before = os.getloadavg()
    floor_site = median_run([sys.executable, "-c", "pass"], args.repeat)
    floor_bare = median_run([sys.executable, "-I", "-S", "-c", "pass"], args.repeat)

    #: name, then (wall ms, CPU ms) of: hwagent text, lstopo console, hwagent json, lstopo xml
    rows: list[tuple[str, Timing, Timing, Timing, Timing]] = []
    for name, root in snapshots(args.cache_dir, args.only):
        sysfs = str(root / "sys")
        rows.append((
            name,
            median_run([*hw, "topology", "--sysfs-root", sysfs], args.repeat),
            median_run([lstopo, "--if", "fsroot", "-i", str(root), "--of", "console"], args.repeat),
            median_run([*hw, "topology", "--format", "json", "--sysfs-root", sysfs], args.repeat),
            median_run([lstopo, "--if", "fsroot", "-i", str(root), "--of", "xml"], args.repeat),
        ))
    load_after = os.getloadavg()

    print(f"hwagent topology against lstopo-no-graphics, processes; median of {args.repeat} runs; "
          f"load average {load_before[0]:.1f} -> {load_after[0]:.1f} on {os.cpu_count()} cpus")
    print(f"floors: python -c pass {floor_site[1]:.1f} ms CPU ({floor_site[0]:.1f} wall); "
          f"python -I -S -c pass {floor_bare[1]:.1f} ms CPU ({floor_bare[0]:.1f} wall)")
    print()
    print(f"{'snapshot':40} {'text CPU ms':>11} {'console':>8} {'ratio':>6} {'json CPU ms':>11} {'xml':>8} {'ratio':>6}"
          f" {'text wall':>9} {'console':>8}")
    for name, text, console, js, xml in rows:
        print(f"{name[:40]:40} {text[1]:>11.1f} {console[1]:>8.1f} {text[1] / console[1]:>5.1f}x"
              f" {js[1]:>11.1f} {xml[1]:>8.1f} {js[1] / xml[1]:>5.1f}x {text[0]:>9.1f} {console[0]:>8.1f}")
    if not rows:
        return 0
    print()
    for label, pick in (("text / console", lambda r: (r[1], r[2])), ("json / xml", lambda r: (r[3], r[4]))):
        pairs = [(r[0], *pick(r)) for r in rows]
        ratios = [(mine[1] / peer[1], name) for name, mine, peer in pairs]
        met = sum(1 for q, _ in ratios if q <= 1)
        worst, best = max(ratios), min(ratios)
        above_floor = [mine[1] - floor_bare[1] for _, mine, _ in pairs]
        print(f"goal hwagent CPU <= lstopo's ({label}): met on {met} of {len(rows)} snapshots; "
              f"ratio {best[0]:.2f}x ({best[1]}) to {worst[0]:.2f}x ({worst[1]}); "
              f"hwagent above the bare interpreter: median {statistics.median(above_floor):.1f} ms CPU")
    under_floor = sum(1 for r in rows if r[2][1] < floor_bare[1])
    print(f"lstopo's console run is below the bare interpreter's {floor_bare[1]:.1f} ms CPU on "
          f"{under_floor} of {len(rows)} snapshots: no Python process can meet the goal there")
    return 0


if __name__ == "__main__":
    sys.exit(main())
