"""Every snapshot's `hwagent topology --format json` validates against docs/topology.schema.json.

The schema is the contract tools read (docs/topology.md); ``additionalProperties:
false`` throughout, so a key added without documenting it fails here too. Beyond
the schema, the cross-references it cannot express are checked: every CPU in
exactly one core, package core counts equal to the cores listed, groups inside
their package.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is a test dependency (pip install -e '.[test]')")

from agent.cpuset import CPUSet  # noqa: E402
from agent.topology.document import from_document, to_document  # noqa: E402
from agent.topology.sysfs import read_topology  # noqa: E402
from tests.conftest import REPO, hwloc_snapshot_names  # noqa: E402
from tests.integration.topology.snapshots import snapshot_root  # noqa: E402
from tests.unit.topology.fake_sysfs import amd_compute_unit_machine  # noqa: E402

SCHEMA = json.loads((REPO / "docs" / "topology.schema.json").read_text())


def check(doc: dict) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(doc, SCHEMA, cls=jsonschema.Draft202012Validator)
    online = CPUSet.parse(doc["cpus"])
    in_cores = [c for k in doc["cores"] for c in CPUSet.parse(k["cpus"])]
    assert sorted(in_cores) == sorted(online)
    for p in doc["packages"]:
        pk = CPUSet.parse(p["cpus"])
        assert p["cores"] == sum(1 for k in doc["cores"] if CPUSet.parse(k["cpus"]) <= pk)
    for g in doc["groups"]:
        pk = next(p for p in doc["packages"] if p["id"] == g["package"])
        assert CPUSet.parse(g["cpus"]) <= CPUSet.parse(pk["cpus"])
    assert [p["logical"] for p in doc["packages"]] == list(range(len(doc["packages"])))


@pytest.mark.parametrize("name", hwloc_snapshot_names())
def test_snapshot_document_validates(name: str, hwloc_extract) -> None:
    root = snapshot_root(hwloc_extract, name)
    topo = read_topology(root / "sys", root / "proc", self_cgroup=True)
    doc = json.loads(json.dumps(to_document(topo)))
    check(doc)
    assert from_document(doc) == topo


def test_compute_unit_document_has_the_group_level(tmp_path: Path) -> None:
    m = amd_compute_unit_machine(tmp_path)
    doc = to_document(read_topology(m.sys, m.proc))
    check(doc)
    assert "compute_unit" in doc["levels"] and len(doc["cores"]) == 8
    assert [g["cpus"] for g in doc["groups"] if g["kind"] == "compute_unit"] == ["0-1", "2-3", "4-5", "6-7"]


def test_schema_rejects_an_undocumented_key() -> None:
    doc = to_document(read_topology("/sys", "/proc"))
    doc["packages"][0]["surprise"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA, cls=jsonschema.Draft202012Validator)
