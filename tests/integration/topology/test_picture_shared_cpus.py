"""A CPU two pools hold is drawn in both (issue 37 item 4): `cpus` said reclaim=1 share=1, the
picture coloured CPU 1 "reclaim" only, and its legend listed "pool share: 1 CPUs" with no CPU
in that colour."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.topology.test_picture import SVG, check_structure, render
from tests.unit.topology.fake_sysfs import FakeMachine


def test_a_cpu_in_two_pools_carries_both_names_and_both_colours(tmp_path: Path) -> None:
    m = FakeMachine(tmp_path / "m", packages=1, cores_per_package=2).build()
    ov = tmp_path / "overlay.json"
    ov.write_text(json.dumps({"format": "hwagent-overlay/1",
                              "pools": [{"name": "reclaim", "cpus": "1"}, {"name": "share", "cpus": "1"}],
                              "allocations": [{"pod": "default/ded", "container": "main", "cpus": "0"}]}))
    root = check_structure(render(tmp_path, "--sysfs-root", str(m.sys), "--overlay", str(ov)))
    pus = {int(g.get("data-cpu")): g for g in root.iter(f"{SVG}g") if g.get("class") == "pu"}
    assert pus[1].get("data-pool") == "reclaim share"
    fills = [r.get("fill") for r in pus[1].iter(f"{SVG}rect")]
    legend = {t.text: None for t in root.find(f"{SVG}g[@class='legend']").iter(f"{SVG}text")}
    assert len(set(fills)) == 2, fills  # reclaim's colour and a stripe of share's
    swatches = [r.get("fill") for r in root.find(f"{SVG}g[@class='legend']").iter(f"{SVG}rect")]
    assert set(fills) <= set(swatches), (fills, swatches, legend)
    tip = pus[1].find(f"{SVG}title").text or ""
    assert "pool reclaim" in tip and "pool share" in tip, tip
