"""The eviction record outlives the daemon: a restarted daemon's `status` shows the last
evictions from evictions.jsonl, not "none" (issue 23)."""

from __future__ import annotations

import json

from agent.pressure.actions import EvictionRecord


def test_a_new_record_reads_the_last_evictions_back_from_its_file(tmp_path):
    path = tmp_path / "evictions.jsonl"
    lines = [json.dumps({"pod_uid": f"u{i}", "wall_time": float(i)}) for i in range(5)]
    # a torn last line (a kill mid-write) and a stray bad one are skipped, not fatal
    path.write_text("\n".join(lines[:2] + ["{not json"] + lines[2:]) + '\n{"pod_uid": "torn')
    rec = EvictionRecord(path, keep=3)
    assert [r["pod_uid"] for r in rec.recent] == ["u2", "u3", "u4"]
    assert [r["pod_uid"] for r in EvictionRecord(path).recent] == ["u0", "u1", "u2", "u3", "u4"]
    assert list(EvictionRecord(tmp_path / "none.jsonl").recent) == []
    assert list(EvictionRecord(None).recent) == []
