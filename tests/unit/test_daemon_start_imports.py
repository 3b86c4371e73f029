"""The daemon's start imports nothing that only a later event needs.

READY waits for every component's imports (bench/daemon.py: about 220 ms of
CPU against 17-25 ms for an interpreter that sends READY itself, most of it
module loading). PyYAML (7 ms) was loaded at start by the manifest parser
although the embedded defaults start with no manifest, and a JSON manifest,
the CLI's form, never needs it: it is loaded when a YAML document is parsed.
"""

from __future__ import annotations

import json
import subprocess
import sys

#: imports the daemon's command and every built-in component's module, as ``hwagent run`` does before READY,
#: then parses a JSON manifest (the CLI's form) and reports the modules; then a YAML one
CHILD = """
import importlib, json, sys
import agent.commands.run
from agent.daemon.daemon import COMPONENTS
for spec in COMPONENTS:
    importlib.import_module(spec.partition(":")[0])
from agent.workloads.manifest import load_document
load_document('{"kind": "Pod", "metadata": {"name": "a"}}')
before = sorted(sys.modules)
doc = load_document("kind: Pod\\nmetadata:\\n  name: b\\n")
print(json.dumps({"before": before, "yaml_doc": doc, "after": "yaml" in sys.modules}))
"""


def test_start_and_json_manifests_do_not_load_yaml():
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    loaded = [m for m in got["before"] if m == "yaml" or m.startswith("yaml.")]
    assert not loaded, f"the daemon's start (or a JSON manifest) loaded {loaded}"
    assert got["yaml_doc"] == {"kind": "Pod", "metadata": {"name": "b"}}
    assert got["after"], "a YAML manifest is parsed with PyYAML"
