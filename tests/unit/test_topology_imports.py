"""`hwagent topology` loads only what its output needs.

lstopo reads a snapshot in 1-9 ms of CPU; ``hwagent topology`` as a process
cost 46-66 ms, of which the interpreter with this venv's site is about 17 ms
and most of the rest was imports (bench/topology.py, docs/performance.md).
Each format runs here to its end in a fresh interpreter on an hwloc snapshot
that reads without warnings, and the modules it loaded are checked: the text
tree needs neither the JSON document nor the picture, none of them needs the
daemon, the config loader or the device inventory, and a reading that logs
nothing does not load :mod:`logging`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: a snapshot the reader takes without a warning (so nothing is logged)
SNAPSHOT = "32intel64-2p8co2t+8ve"

#: loaded by no format
ALWAYS_FORBIDDEN = (
    "logging",
    "typing",
    "yaml",
    "prometheus_client",
    "grpc",
    "google.protobuf",
    "agent.api",
    "agent.config",
    "agent.daemon",
    "agent.contracts",
    "agent.status",
    "agent.devices",
    "agent.topology.picture",
    "agent.topology.svg",
    "agent.topology.overlay",
)

#: loaded by the text tree only when asked for another format
TEXT_FORBIDDEN = ("json", "agent.topology.document")

#: the checkout whose ``agent`` the child imports
SOURCE = str(Path(__file__).resolve().parents[2])

#: the child lists its modules before it imports json to write them down; it starts as the
#: ``hwagent`` entry script starts ``topology`` (agent/commands/_entry.py: ``-S``, the checkout on
#: sys.path), so a ``.pth`` file of the machine's (one that imports certifi, say) is not counted
CHILD = """
import sys
sys.path.insert(0, SOURCE)
from agent.cli import main
rc = main(sys.argv[2:])
mods = sorted(sys.modules)
import json
with open(sys.argv[1], "w") as f:
    json.dump({"rc": rc, "modules": mods}, f)
""".replace("SOURCE", repr(SOURCE), 1)


def _modules(tmp_path: Path, argv: list[str]) -> tuple[int, list[str], str]:
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if k != "HWAGENT_CONFIG"}
    proc = subprocess.run([sys.executable, "-S", "-c", CHILD, str(out), *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert out.exists(), f"{argv}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    got = json.loads(out.read_text())
    return got["rc"], got["modules"], proc.stderr


def _bad(modules: list[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden))


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_topology_loads_only_what_its_format_needs(hwloc_extract, tmp_path, fmt):
    root = hwloc_extract(SNAPSHOT)
    rc, modules, stderr = _modules(tmp_path, ["topology", "--format", fmt, "--sysfs-root", str(root / "sys")])
    assert rc == 0, stderr
    assert stderr == "", f"the snapshot is meant to read without warnings: {stderr}"
    forbidden = ALWAYS_FORBIDDEN + (TEXT_FORBIDDEN if fmt == "text" else ())
    bad = _bad(modules, forbidden)
    assert not bad, f"hwagent topology --format {fmt} imported {bad}"


#: a snapshot whose reading has warnings (no die_id on its old kernel, ...)
WARNED = "2arm-2c"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_warnings_are_in_the_output_once_and_logging_not_loaded(hwloc_extract, tmp_path, fmt):
    """The text tree and the JSON document carry every warning; logging them too wrote a bare
    "topology warning" line per warning to stderr and loaded :mod:`logging` (3-5 ms) for it."""
    root = hwloc_extract(WARNED)
    rc, modules, stderr = _modules(tmp_path, ["topology", "--format", fmt, "--sysfs-root", str(root / "sys")])
    assert rc == 0, stderr
    assert stderr == ""
    assert not _bad(modules, ("logging",)), "hwagent topology loaded logging for warnings it prints itself"
    out = subprocess.run([sys.executable, "-m", "agent.cli", "topology", "--format", fmt, "--sysfs-root",
                          str(root / "sys")], capture_output=True, text=True, timeout=120, check=True).stdout
    warnings = json.loads(out)["warnings"] if fmt == "json" else out.split("Warnings (", 1)[1].splitlines()[1:]
    assert warnings, "the snapshot is meant to read with warnings"
