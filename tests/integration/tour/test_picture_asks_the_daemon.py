"""The picture agrees with `hwagent cpus` (issue 37 item 4): it asks the running daemon, as
every other view does (it read the checkpoint and said "no device resources: no
device-manager checkpoint" while the daemon ran), and a CPU two pools share is drawn in both
(`cpus` said reclaim=1 share=1, the PNG coloured CPU 1 "reclaim" only and listed "pool share:
1 CPUs" with no CPU in that colour)."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest

from agent.cpuset import CPUSet
from tests.integration.tour.conftest import Tour, open_tour

pytestmark = [pytest.mark.root, pytest.mark.timeout(180)]

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def tour() -> Iterator[Tour]:
    # a short ramp-up, so the shared pods join their pool within the test
    yield from open_tour({"cpu": {"transition_period_s": "0.5", "cpuset_check_interval_s": "0.5"}})


def pools_per_cpu(pools: dict[str, str]) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for name, cpus in pools.items():
        for c in CPUSet.parse(cpus):
            out.setdefault(c, set()).add(name)
    return out


def test_the_picture_draws_the_pools_cpus_shows_from_the_running_daemon(tour: Tour, tmp_path) -> None:
    tour.ok("launch", "--name", "web", "--cpu-request", "100m", "--", "sleep", "120")
    deadline = time.monotonic() + 60
    while True:
        view = json.loads(tour.ok("cpus", "--format", "json"))
        if "share" in view["pools"] and not any(a["ramp_up"] for a in view["allocations"]):
            break
        assert time.monotonic() < deadline, view
        time.sleep(0.2)
    out = tmp_path / "m.svg"
    tour.ok("topology", "--format", "svg", "-o", str(out))
    root = ET.parse(out).getroot()
    drawn = {int(g.get("data-cpu")): set((g.get("data-pool") or "").split())
             for g in root.iter(f"{SVG}g") if g.get("class") == "pu"}
    view = json.loads(tour.ok("cpus", "--format", "json"))
    want = pools_per_cpu({p: c for p, c in view["pools"].items() if c and p != "dedicated"})
    assert {c: p for c, p in drawn.items() if p} == want, (drawn, view["pools"])
    note = " ".join(t.text or "" for t in root.iter(f"{SVG}text") if t.get("class") == "note")
    assert "checkpoint" not in note and "(live)" in note, note
