"""`hwagent topology` through agent.cli.main, on snapshot roots and on this machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main
from agent.topology.document import from_document, to_document
from agent.topology.sysfs import read_topology
from tests.integration.topology.snapshots import snapshot_root

# a spread of shapes: multi-die, memory-only nodes, offline CPUs, no NUMA dir, cpuset-restricted
CLI_SNAPSHOTS = [
    "fakecpuid1f-64intel64-2p4d2n2c2t",
    "fakeheteromemtiers",
    "offline-cpu0-node0",
    "20s390-2g6s4c",
    "16amd64-8n2c-cpusets",
]


@pytest.mark.parametrize("name", CLI_SNAPSHOTS)
def test_json_on_snapshot_round_trips_to_the_model(name: str, hwloc_extract, capsys) -> None:
    root = snapshot_root(hwloc_extract, name)
    assert main(["topology", "--sysfs-root", str(root / "sys"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # the command pairs a snapshot's sys/ with the proc/ beside it, and does not
    # treat it as this process's machine (no allowed sets)
    expected = read_topology(root / "sys", root / "proc")
    assert expected.allowed_cpus is None
    assert from_document(doc) == expected
    assert doc == json.loads(json.dumps(to_document(expected)))


@pytest.mark.parametrize("name", CLI_SNAPSHOTS)
def test_text_on_snapshot_lists_every_package_and_node(name: str, hwloc_extract, capsys) -> None:
    root = snapshot_root(hwloc_extract, name)
    assert main(["topology", "--sysfs-root", str(root / "sys")]) == 0
    text = capsys.readouterr().out
    topo = read_topology(root / "sys", root / "proc")
    for i, p in enumerate(topo.package_ids):
        kernel = f" [{p}]" if p != i else ""
        cores = len(topo.cores_of_package(p))
        assert f"package {i}{kernel}: {cores} core{'s' if cores != 1 else ''}, cpus {topo.cpus_of_package(p)}" in text
    for n in topo.numa_nodes:
        assert f"  node {n.id}: " in text
    if topo.warnings:
        assert text.rstrip().endswith(topo.warnings[-1])


def test_live_json_matches_the_live_model(capsys) -> None:
    assert main(["topology", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    live = read_topology()
    assert from_document(doc) == live
    assert doc["cpus"] == str(live.online) and doc["allowed_cpus"] == str(live.allowed_cpus)


def test_live_text(capsys) -> None:
    assert main(["topology"]) == 0
    out = capsys.readouterr().out
    live = read_topology()
    assert out.startswith(f"{len(live.cpus)} CPU")
    assert "package 0" in out and ", cpus " in out and "NUMA nodes:" in out


def test_wrong_root_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["topology", "--sysfs-root", str(tmp_path / "nope")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("hwagent topology: error: ") and f"{tmp_path}/nope/devices/system/cpu" in lines[0]


def test_snapshot_root_instead_of_its_sys_gets_a_hint(hwloc_extract, capsys) -> None:
    root = snapshot_root(hwloc_extract, "2arm-2c")
    assert main(["topology", "--sysfs-root", str(root)]) == 2
    assert f"try --sysfs-root {root / 'sys'}" in capsys.readouterr().err


def test_bad_format_is_an_argparse_error(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["topology", "--format", "yaml"])
    assert e.value.code == 2
    assert "invalid choice: 'yaml'" in capsys.readouterr().err


def test_topology_command_loads_only_its_own_module() -> None:
    """`hwagent topology` builds its parser alone: no config loader, daemon or probes imported."""
    import subprocess
    import sys

    code = (
        "import sys; from agent.cli import main; rc = main(['topology', '--format', 'json']);"
        " print(sorted(m for m in sys.modules if m.startswith(('agent.config', 'agent.pressure', 'agent.daemon', 'grpc'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
    # the full parser is still what --help and unknown names get
    helped = subprocess.run([sys.executable, "-m", "agent.cli", "--help"], capture_output=True, text=True, timeout=60)
    assert "topology" in helped.stdout and "doctor" in helped.stdout
