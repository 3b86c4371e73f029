"""kill -9 of a process appending to a journal at random moments (issue 15):
concurrent writers (group commit) and a small compaction size (rotations and
background snapshots during the run). After each kill, recovery must hold
every acknowledged record, and nothing but a prefix of the records appended:
a record synced but not yet acknowledged may survive (as a kubelet's
checkpoint written just before a crash does); none is invented, reordered or
duplicated. Stale temp files of the killed writer are removed at start."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agent.journal import Journal, StateCorrupt

pytestmark = pytest.mark.fault

TRIALS = 12


class ListCodec:
    """State = the list of ints appended, in order."""

    def empty(self):
        return []

    def decode_snapshot(self, raw):
        try:
            doc = json.loads(raw)
            return list(doc["items"]), int(doc["seq"])
        except (ValueError, KeyError, TypeError) as e:
            raise StateCorrupt(str(e)) from None

    def encode_snapshot(self, state, seq):
        return json.dumps({"items": list(state), "seq": seq}).encode()

    def apply(self, state, payload):
        try:
            state.append(int(payload))
        except ValueError:
            raise StateCorrupt("not an int") from None
        return state


CHILD = textwrap.dedent("""
    import asyncio, os, sys
    sys.path.insert(0, {test_dir!r})
    from test_journal_kill import ListCodec
    from agent.journal import Journal

    async def main(path, start):
        j = Journal(path, ListCodec(), compact_bytes=2048)
        rec = j.recover()
        items = rec.state
        j.start(list(items), capture=lambda: list(items))
        out = sys.stdout
        n = start
        async def writer(w):
            nonlocal n
            while True:
                v = n
                n += 1
                items.append(v)            # memory and record in the same loop step
                out.write(f"A {{v}}\\n")
                fut = j.append(str(v).encode())
                await fut
                out.write(f"K {{v}}\\n")
                out.flush()
        await asyncio.gather(*(writer(w) for w in range(16)))

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
""")


def _recover(path: Path) -> tuple[list[int], object]:
    j = Journal(path, ListCodec())
    try:
        rec = j.recover()
        return list(rec.state), rec
    finally:
        j.close_sync()


def test_kill_minus_nine_at_random_points_loses_and_invents_nothing(tmp_path):
    test_dir = str(Path(__file__).parent)
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(test_dir=test_dir))
    path = tmp_path / "state.json"
    rng = random.Random(20261201)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), test_dir])}
    expected: list[int] = []  # what survived so far, in order
    start = 0
    total_acked = 0
    for trial in range(TRIALS):
        proc = subprocess.Popen([sys.executable, str(script), str(path), str(start)], stdout=subprocess.PIPE,
                                env=env, text=True)
        # let it run until it has acknowledged something, then a random extra moment
        first = proc.stdout.readline()
        assert first, f"trial {trial}: the writer printed nothing"
        time.sleep(rng.uniform(0.0, 0.3))
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read()
        proc.wait()
        lines = (first + rest).splitlines()
        appended = [int(x[2:]) for x in lines if x.startswith("A ")]
        acked = {int(x[2:]) for x in lines if x.startswith("K ")}
        total_acked += len(acked)
        got, rec = _recover(path)
        assert got[: len(expected)] == expected, f"trial {trial}: earlier records lost or changed"
        new = got[len(expected):]
        assert new == appended[: len(new)], f"trial {trial}: recovered records are not a prefix of the appends"
        assert acked <= set(new), f"trial {trial}: acknowledged records lost: {sorted(acked - set(new))[:5]}"
        assert len(set(got)) == len(got)
        expected = got
        start = max(appended, default=start - 1) + 1
    assert total_acked > TRIALS  # the runs did acknowledge work
    leftovers = [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name]
    # a killed writer may leave temp files; the next start removes them
    j = Journal(path, ListCodec())
    try:
        rec = j.recover()
        assert rec.stale_temps_removed == len(leftovers)
    finally:
        j.close_sync()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
