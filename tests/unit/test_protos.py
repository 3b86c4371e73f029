"""The generated gRPC modules are current, and our .proto files match upstream on the wire."""

from __future__ import annotations

import filecmp
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.proto_fingerprint import from_module

REPO = Path(__file__).resolve().parents[2]
FINGERPRINT = Path(__file__).with_name("data") / "upstream_proto_fingerprint.txt"
APIS = ("deviceplugin/v1beta1", "pluginregistration/v1", "podresources/v1", "resourceplugin/v1alpha1",
        "evictionplugin/v1alpha1", "dra/v1", "dra/v1beta1", "drahealth/v1alpha1", "drahealth/v1",
        "nri/v1alpha1", "ttrpc/v1", "cri/v1")
#: upstream files of which we re-author only some messages: ours must be a subset of upstream's lines
SUBSET_APIS = ("k8s/core/v1", "k8s/meta/v1")
#: hwagent's own APIs (proto/hwagent/... and proto/agent/api/status): no upstream to pin, but generated the same way
OWN_APIS = ("admission/v1", "status/v1")
GENERATED = ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py")


def _upstream_sections() -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in FINGERPRINT.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
        else:
            assert current is not None, f"fingerprint line outside a section: {line}"
            current.append(line)
    return sections


def test_generated_modules_are_not_stale(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHON=sys.executable)
    subprocess.run(
        ["bash", str(REPO / "scripts" / "gen-protos"), "--out", str(tmp_path)],
        check=True, env=env, capture_output=True, text=True,
    )
    stale = []
    for api in APIS + SUBSET_APIS + OWN_APIS:
        for name in GENERATED:
            fresh = tmp_path / "agent" / "api" / api / name
            committed = REPO / "agent" / "api" / api / name
            assert fresh.exists(), f"gen-protos did not produce {fresh}"
            if not committed.exists() or not filecmp.cmp(fresh, committed, shallow=False):
                stale.append(str(committed.relative_to(REPO)))
    assert not stale, f"stale generated modules (run scripts/gen-protos): {stale}"


def test_every_api_is_pinned() -> None:
    assert sorted(_upstream_sections()) == sorted(APIS + SUBSET_APIS)


@pytest.mark.parametrize("api", APIS)
def test_wire_identical_to_upstream(api: str) -> None:
    module = importlib.import_module("agent.api." + api.replace("/", ".") + ".api_pb2")
    ours = set(from_module(module))
    upstream = set(_upstream_sections()[api])
    missing = sorted(upstream - ours)
    extra = sorted(ours - upstream)
    assert not missing and not extra, f"missing vs upstream: {missing}\nextra vs upstream: {extra}"


@pytest.mark.parametrize("api", APIS)
def test_grpc_stubs_import_and_name_services(api: str) -> None:
    grpc_mod = importlib.import_module("agent.api." + api.replace("/", ".") + ".api_pb2_grpc")
    pkg = importlib.import_module("agent.api." + api.replace("/", ".") + ".api_pb2").DESCRIPTOR.package
    services = [line.split()[1] for line in _upstream_sections()[api] if line.startswith("service ")]
    for full in services:
        short = full.rsplit(".", 1)[1]
        assert hasattr(grpc_mod, f"{short}Stub"), f"no client stub for {full}"
        assert hasattr(grpc_mod, f"add_{short}Servicer_to_server"), f"no server hook for {full}"
        assert full.startswith(pkg + ".")


@pytest.mark.parametrize("api", SUBSET_APIS)
def test_subset_wire_compatible_with_upstream(api: str) -> None:
    """Every message, field and map entry we declare is upstream's, same number and type."""
    module = importlib.import_module("agent.api." + api.replace("/", ".") + ".api_pb2")
    ours = set(from_module(module))
    upstream = set(_upstream_sections()[api])
    foreign = sorted(ours - upstream)
    assert not foreign, f"not upstream's (wrong name, number, type or label): {foreign}"
    assert any(line.startswith("field ") for line in ours)
