"""hwagent's daemon as the plugin of containerd's own NRI runtime code, on a busy node.

``nripeer drive`` runs NRI's ``pkg/adaptation`` (the package containerd calls its plugins
with, with containerd's 2 s plugin timeout) and synchronizes the plugin with 1,000 running
Burstable containers, as containerd does for a plugin that registers on a busy node, then
times CreateContainer calls. The first Synchronize must pass (before the batch it took past
2 s and the runtime dropped the plugin), every create must come back with hwagent's
placement, and none may near the timeout. Needs nripeer (tests/peer/nri/build.sh; skipped
without it, as CI has no Go)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tests.peer.nri.test_floor import NRIPEER, needs_nripeer

pytestmark = [pytest.mark.root, pytest.mark.slow]


@needs_nripeer
def test_a_synchronize_of_1000_containers_passes_and_each_create_is_placed() -> None:
    from bench.cli import Acct, remove_subtree
    from bench.nri import Plugin, round_trip

    base = Path(tempfile.mkdtemp(prefix="hwagent-peer-scale-", dir="/tmp"))
    acct = Acct(f"hwagent-peer-scale-{os.getpid()}")
    try:
        res = round_trip(NRIPEER.parent, Plugin("hwagent", base / "nri.sock", base, subtree="/" + acct.path.name),
                         1000, 3, 10)
    finally:
        remove_subtree(acct)
    assert res["sync_failures"] == [], f"the runtime dropped hwagent: {res['sync_failures'][:2]}"
    assert res["errors"] == []
    assert len(res["round_trip_us"]) == 30
    assert sum(res["adjustments"].values()) == 30 and all("cpus=" in a for a in res["adjustments"])
    assert max(res["round_trip_us"]) < 1_000_000, max(res["round_trip_us"])  # half the runtime's timeout
