"""kill -9 of a DRA driver while it prepares claims (issue 27): after a restart
every claim's prepare answers what an uninterrupted driver answers, no CDI
spec is left that no prepared claim names, every prepared claim has its spec,
and no device is prepared twice."""

from __future__ import annotations

import asyncio
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

from agent.contracts.dra import ClaimRef
from tests.fault.conftest import COUNTS
from tests.unit.dra.driver_support import claim_doc, make_driver, write_claim

pytestmark = pytest.mark.fault

TRIALS = 10
CLAIMS = 12
REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    from agent.contracts.dra import ClaimRef
    from tests.unit.dra.driver_support import make_driver

    async def main(root):
        drv = make_driver(root, {n})
        print("ready", flush=True)
        for i in range({n}):
            await drv.prepare([ClaimRef("default", f"c{{i}}", f"uid-{{i}}")])
            print("prepared", i, flush=True)
        print("done", flush=True)

    asyncio.run(main(Path(sys.argv[1])))
""")


def _refs() -> list[ClaimRef]:
    return [ClaimRef("default", f"c{i}", f"uid-{i}") for i in range(CLAIMS)]


def _setup(root: Path) -> None:
    for i in range(CLAIMS):
        write_claim(root, claim_doc(f"c{i}", f"uid-{i}", [f"loop{i}"]))


def _answers(root: Path):
    drv = make_driver(root, CLAIMS)
    return drv, asyncio.run(drv.prepare(_refs()))


def test_prepare_survives_kill9(tmp_path) -> None:
    ref_root = tmp_path / "reference"
    _setup(ref_root)
    t0 = time.monotonic()
    _, expected = _answers(ref_root)
    per_claim = (time.monotonic() - t0) / CLAIMS
    assert all(o.error == "" for o in expected.values())
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO), n=CLAIMS))
    rng = random.Random(27)
    killed_mid = 0
    for trial in range(TRIALS):
        root = tmp_path / f"t{trial}"
        _setup(root)
        p = subprocess.Popen([sys.executable, str(script), str(root)], stdout=subprocess.PIPE, text=True)
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for _ in range(rng.randrange(CLAIMS)):  # let some prepares finish, then kill inside the next one
            p.stdout.readline()
        time.sleep(rng.uniform(0, per_claim))
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        state = root / "dra-state" / "prepared.json"
        before = len(json.loads(state.read_text())["claims"]) if state.exists() else 0
        killed_mid += 0 < before < CLAIMS
        drv = make_driver(root, CLAIMS)  # the restart
        assert drv.state_error == ""
        specs = sorted(f.name for f in (root / "cdi").iterdir()) if (root / "cdi").exists() else []
        assert specs == sorted(f"hwagent.io-claim-{uid}.json" for uid in drv.prepared())
        assert not [f for f in (root / "cdi").glob(".*")] if (root / "cdi").exists() else True
        got = asyncio.run(drv.prepare(_refs()))
        assert got == expected
        devices = [d.device for _, devs in drv.prepared().values() for d in devs]
        assert len(devices) == len(set(devices)) == CLAIMS
    COUNTS["dra prepare kill -9: trials"] += TRIALS
    COUNTS["dra prepare kill -9: killed with some claims prepared"] += killed_mid
