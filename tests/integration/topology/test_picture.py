"""`hwagent topology --format svg|png`: the picture's structure on real snapshots and a daemon's state.

The SVG contract (agent/topology/svg.py): one ``g.pu`` per online CPU and one
``g.device`` per drawn device, each exactly once; every box's rectangle holds
its children's; the root carries width, height and viewBox. Checked on
snapshots chosen for their shapes (64 NUMA nodes, arm clusters, memory-only
nodes, an offline CPU, PCI devices with and without NUMA nodes).
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from agent.cli import main
from agent.cpu.checkpoint import CheckpointStore
from agent.cpuset import CPUSet
from agent.devices.sysfs import read_inventory
from agent.topology.io import drawn
from agent.status.live import parse_pool_pressure
from agent.topology.sysfs import read_topology
from tests.integration.topology.snapshots import snapshot_root
from tests.unit.cpu.helpers import make_policy, req
from tests.unit.topology.fake_sysfs import FakeMachine

SVG = "{http://www.w3.org/2000/svg}"
SHAPES = [
    "256ia64-64n2s2c",
    "128arm-2pa2n8cluster4co",
    "40intel64-2g2n4c+pcilocality",
    "32em64t-2n8c+dax+nvme+mic+dimms",
    "fakeheteromemtiers",
    "offline-cpu0-node0",
    "2ps3-2t",
]


def render(tmp_path: Path, *args: str, fmt: str = "svg") -> Path:
    out = tmp_path / f"picture.{fmt}"
    assert main(["topology", "--format", fmt, "-o", str(out), *args]) == 0
    return out


def _rect(g: ET.Element) -> tuple[float, float, float, float]:
    r = g.find(f"{SVG}rect")
    assert r is not None, f"{g.get('class')} has no rect"
    return tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))  # type: ignore[return-value]


def _inside(inner, outer) -> bool:
    (x, y, w, h), (X, Y, W, H) = inner, outer
    return X - 0.01 <= x and Y - 0.01 <= y and x + w <= X + W + 0.01 and y + h <= Y + H + 0.01


def check_structure(svg_path: Path) -> ET.Element:
    """Well-formed, the documented element structure, nesting by geometry; returns the root."""
    root = ET.parse(svg_path).getroot()
    assert root.tag == f"{SVG}svg"
    w, h = float(root.get("width")), float(root.get("height"))
    assert root.get("viewBox") == f"0 0 {w:.0f} {h:.0f}" and w > 0 and h > 0
    ids = [e.get("id") for e in root.iter() if e.get("id")]
    assert len(ids) == len(set(ids)), "duplicate ids"

    def walk(g: ET.Element, outer) -> None:
        for child in g.findall(f"{SVG}g"):
            cls = child.get("class", "").split()
            assert cls and cls[0] in ("box", "pu", "device"), cls
            rect = _rect(child)
            assert _inside(rect, outer), f"{child.get('class')} {child.get('id')} sticks out of its parent"
            if cls[0] in ("pu", "device"):
                assert child.find(f"{SVG}title") is not None and child.find(f"{SVG}text") is not None
                assert not child.findall(f"{SVG}g")
            else:
                walk(child, rect)

    picture = root.find(f"{SVG}g[@class='machine-picture']")
    assert picture is not None
    machine = picture.find(f"{SVG}g")
    assert machine is not None and machine.get("class") == "box machine"
    walk(machine, _rect(machine))
    return root


def cpus_drawn(root: ET.Element) -> list[int]:
    return [int(g.get("data-cpu")) for g in root.iter(f"{SVG}g") if g.get("class") == "pu"]


def devices_drawn(root: ET.Element) -> list[str]:
    return [g.get("data-device") for g in root.iter(f"{SVG}g") if g.get("class") == "device"]


@pytest.mark.parametrize("name", SHAPES)
def test_snapshot_picture_has_every_cpu_and_device_once(name: str, hwloc_extract, tmp_path: Path) -> None:
    snap = snapshot_root(hwloc_extract, name)
    svg = render(tmp_path, "--sysfs-root", str(snap / "sys"))
    root = check_structure(svg)
    topo = read_topology(snap / "sys", snap / "proc")
    assert sorted(cpus_drawn(root)) == sorted(topo.online)
    expected = sorted(d.id for d in read_inventory(snap / "sys") if drawn(d)) if (snap / "sys/bus/pci").is_dir() else []
    assert sorted(devices_drawn(root)) == expected
    # every NUMA node is drawn once, memory-only ones included
    nodes = [int(g.get("data-numa")) for g in root.iter(f"{SVG}g") if g.get("class") == "box numa"]
    assert sorted(nodes) == sorted(topo.numa_ids)


def test_overlay_colours_pools_allocations_and_devices(hwloc_extract, tmp_path: Path) -> None:
    snap = snapshot_root(hwloc_extract, "40intel64-2g2n4c+pcilocality")
    devs = sorted(d.id for d in read_inventory(snap / "sys") if drawn(d))
    overlay = {
        "format": "hwagent-overlay/1",
        "pools": [{"name": "reserve", "cpus": "0", "pressure": 0.0}, {"name": "share", "cpus": "1-5", "pressure": 1.5},
                  {"name": "batch", "cpus": "6-7"}],
        "allocations": [{"pod": "ml/train-1", "container": "main", "cpus": "10-13"}],
        "devices": [{"id": devs[0], "resource": "example.com/nic", "health": "Unhealthy", "numa": []},
                    {"id": "plugin-gpu-7", "resource": "vendor.com/gpu", "health": "Healthy", "numa": [1],
                     "pod": "ml/train-1"}],
    }
    ov = tmp_path / "overlay.json"
    ov.write_text(json.dumps(overlay))
    root = check_structure(render(tmp_path, "--sysfs-root", str(snap / "sys"), "--overlay", str(ov)))
    pus = {int(g.get("data-cpu")): g for g in root.iter(f"{SVG}g") if g.get("class") == "pu"}
    assert {c for c, g in pus.items() if g.get("data-pod") == "ml/train-1"} == {10, 11, 12, 13}
    assert {c for c, g in pus.items() if g.get("data-pool") == "share"} == {1, 2, 3, 4, 5}
    fills = {c: g.find(f"{SVG}rect").get("fill") for c, g in pus.items()}
    assert fills[1] != fills[0] != fills[6] != fills[10] and fills[20] == "#ffffff"
    heat = {c: g.find(f"{SVG}rect[@class='heat']") for c, g in pus.items()}
    assert heat[1].get("fill") != heat[0].get("fill") and heat[6] is None  # batch has no pressure reading
    # the plugin's device the inventory does not list is drawn (in NUMA node 1), once
    drawn_devs = devices_drawn(root)
    assert sorted(drawn_devs) == sorted([*devs, "plugin-gpu-7"])
    node1 = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "box numa" and g.get("data-numa") == "1")
    assert [g.get("data-device") for g in node1.iter(f"{SVG}g") if g.get("class") == "device"] == ["plugin-gpu-7"]
    bad = next(g for g in root.iter(f"{SVG}g") if g.get("data-device") == devs[0])
    assert bad.find(f"{SVG}rect").get("stroke") == "#d62728"
    legend = " ".join(t.text or "" for t in root.find(f"{SVG}g[@class='legend']").iter(f"{SVG}text"))
    assert "pool share (share): 5 CPUs, pressure 1.50" in legend and "pool batch (named)" in legend
    assert "dedicated: 4 CPUs to 1 pod" in legend and "example.com/nic: 1 devices, 0 allocated, 1 unhealthy" in legend


def test_daemon_state_is_read_from_its_root_dir(tmp_path: Path) -> None:
    """The CPU policy's checkpoint under --root-dir colours the picture (no metrics: noted, not fatal)."""
    m = FakeMachine(tmp_path / "m", packages=2, cores_per_package=4).build()
    topo = read_topology(m.sys, m.proc)
    policy = make_policy(topo=topo)
    policy.allocate(req(uid="db", qos="dedicated_cores", binding=True, hint=(1,)))
    policy.allocate(req(uid="web", qos="shared_cores", cpus=1))
    CheckpointStore(tmp_path / "root" / "cpu").save(policy.state)
    held = next(a.cpuset for a in policy.state.containers() if a.pod_name == "name-db")
    cfg = tmp_path / "hwagent.toml"
    cfg.write_text('[daemon]\nmetrics_address = "127.0.0.1:9"\n')
    root = check_structure(render(tmp_path, "--sysfs-root", str(m.sys), "--root-dir", str(tmp_path / "root"),
                                  "--config", str(cfg)))
    pods = {int(g.get("data-cpu")) for g in root.iter(f"{SVG}g") if g.get("data-pod") == "ns/name-db"}
    assert pods == set(held) and len(pods) == 2
    # a shared container holds no CPUs of its own: it is not drawn as an allocation
    assert {g.get("data-pod") for g in root.iter(f"{SVG}g") if g.get("data-pod")} == {"ns/name-db"}
    pooled = {g.get("data-pool") for g in root.iter(f"{SVG}g") if g.get("class") == "pu"}
    assert set(policy.state.pools) - {"dedicated"} <= pooled | {None}
    note = root.find(f"{SVG}text[@class='note']")
    assert note is not None and "no pool pressure" in note.text and "no device resources" in note.text


def test_pool_pressure_from_metrics_text() -> None:
    text = (
        '# HELP hwagent_pool_cpu_pressure_ratio x\n'
        'hwagent_pool_cpu_pressure_ratio{pool="share"} 0.25\n'
        'hwagent_pool_cpu_pressure_ratio{pool="reclaim"} NaN\n'
        'hwagent_pool_threshold_met{pool="share",kind="soft"} 1.0\n'
    )
    assert parse_pool_pressure(text) == {"share": 0.25}


def test_bad_overlay_is_a_clear_error(tmp_path: Path, capsys) -> None:
    m = FakeMachine(tmp_path / "m").build()
    ov = tmp_path / "o.json"
    ov.write_text('{"format": "hwagent-overlay/1", "pools": [{"name": "x", "cpus": "3-1"}]}')
    assert main(["topology", "--sysfs-root", str(m.sys), "--format", "svg", "--overlay", str(ov)]) == 2
    assert "overlay entry does not parse" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("rsvg-convert") is None, reason="rsvg-convert not installed (librsvg2-bin)")
def test_png_is_a_png_of_the_svg(tmp_path: Path) -> None:
    m = FakeMachine(tmp_path / "m").build()
    png = render(tmp_path, "--sysfs-root", str(m.sys), fmt="png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(png[16:20], "big")
    svg = ET.parse(render(tmp_path, "--sysfs-root", str(m.sys))).getroot()
    assert width == round(float(svg.get("width")))
    assert CPUSet(cpus_drawn(svg)) == CPUSet(range(8))
