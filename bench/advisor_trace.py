"""A daemon run's decisions.jsonl as a controller trace fixture (tests/unit/advisor/data/).

Each decision record carries the interval's inputs and the policy's limits: those are kept
(the samples and limits the controller saw), the decisions themselves are dropped (the test
replays the samples through the controller of the day and asserts its decisions). The first
record (the component's "first reading", decided on no interval) is skipped.

Run: .venv/bin/python bench/advisor_trace.py DECISIONS.jsonl OUT.json "what the run was"
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def trace(records: list[dict], about: str) -> dict:
    rows = []
    for r in records:
        if r.get("reason") == "first reading":
            continue
        i = r["inputs"]
        rows.append({"in": {"at": r["at"], "shared_p99_us": i["shared_p99_us"], "shared_usage": i["shared_usage"],
                            "reclaim_usage": i["reclaim_usage"], "reclaimed": i["reclaimed"],
                            "psi_some": i["psi_some"]},
                     "limits": r["limits"], "recorded": {"action": r["action"], "quota_cpus": r["quota_cpus"]}})
    return {"about": about, "samples": rows}


def main() -> int:
    src, out, about = sys.argv[1], sys.argv[2], sys.argv[3]
    records = [json.loads(x) for x in Path(src).read_text().splitlines() if x.strip()]
    Path(out).write_text(json.dumps(trace(records, about), indent=None, separators=(",", ":")).replace(
        '{"in"', '\n{"in"') + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
