"""`hwagent explain POD` says the pod's current state first, then its history (issue 37 item 3):
`explain hog2` said "suppressed from 15:31:26" after the advisor had lifted the quota at
15:31:58 (`explain pool` said so, and cpu.cfs_quota_us was -1). Run as a user runs it: the CLI
on a root dir holding the advisor's decisions log, no daemon needed."""

from __future__ import annotations

import calendar
import json
import subprocess
import sys
from pathlib import Path

HWAGENT = Path(sys.executable).parent / "hwagent"
DAY = calendar.timegm((2026, 12, 7, 15, 31, 0, 0, 0, 0))


def rec(sec: int, action: str, quota: float | None, reclaimed: list[str], reason: str = "") -> dict:
    return {"wall_time": DAY + sec, "action": action, "quota_cpus": quota, "shared_size": 1,
            "reclaimed_pods": reclaimed, "shared_pods": ["default/web"], "reason": reason or action,
            "inputs": {"shared_p99_us": 900.0}}


def explain(tmp_path: Path, recs: list[dict], pod: str = "hog2") -> str:
    d = tmp_path / "root" / "advisor"
    d.mkdir(parents=True)
    (d / "decisions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    r = subprocess.run([str(HWAGENT), "explain", "--root-dir", str(tmp_path / "root"), pod],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


HOGS = ["default/hog1", "default/hog2"]


def test_a_lifted_quota_reads_as_not_suppressed_now_with_the_suppression_as_history(tmp_path: Path) -> None:
    out = explain(tmp_path, [rec(0, "hold", None, HOGS), rec(26, "suppress", 0.2, HOGS, "p99 900us over 400us"),
                             rec(40, "hold", 0.2, HOGS), rec(58, "relax", None, HOGS, "calm: quota lifted"),
                             rec(70, "hold", None, HOGS)])
    first = out.splitlines()[0]
    assert first.startswith("default/hog2 is a reclaimed pod: not suppressed now"), out
    assert "quota lifted at 15:31:58" in first, out
    assert "\nsuppressed: 15:31:26-15:31:58\n" in out, out
    assert out.index("15:31:26 suppress") > out.index("history"), out


def test_a_held_pod_reads_as_suppressed_since_the_start_of_the_current_hold(tmp_path: Path) -> None:
    out = explain(tmp_path, [rec(0, "suppress", 0.2, HOGS), rec(10, "relax", None, HOGS),
                             rec(20, "suppress", 0.1, HOGS, "again"), rec(30, "hold", 0.1, HOGS)])
    first = out.splitlines()[0]
    assert first.startswith("default/hog2 is a reclaimed pod: suppressed now, since 15:31:20"), out
    assert "held to 0.1 cpus" in first, out


def test_a_pod_the_advisor_no_longer_sees_says_so_first(tmp_path: Path) -> None:
    out = explain(tmp_path, [rec(0, "suppress", 0.2, HOGS), rec(30, "relax", None, ["default/hog1"])])
    assert out.splitlines()[0].startswith("default/hog2: the advisor's latest decision (15:31:30) does not name it"), out
