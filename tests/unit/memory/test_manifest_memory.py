"""Manifests with hugepages: the API server's rules (limit required, request equal to it,
whole bytes), the spec round trip through manifest_of and the registry codec."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.workloads.codec import spec_from_json, spec_to_json
from agent.workloads.manifest import ManifestError, manifest_of, parse_manifest

MB = 1 << 20


def doc(resources: dict[str, Any]) -> str:
    return json.dumps({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "command": ["true"], "resources": resources}]}})


def test_hugepages_are_parsed_to_bytes_and_round_trip() -> None:
    spec = parse_manifest(doc({"limits": {"memory": "512Mi", "hugepages-2Mi": "64Mi", "hugepages-1Gi": "1Gi"}})).pod
    r = spec.containers[0].resources
    assert dict(r.hugepages) == {"hugepages-2Mi": 64 * MB, "hugepages-1Gi": 1 << 30}
    assert r.extended == {}
    assert parse_manifest(json.dumps(manifest_of(spec))).pod.containers[0].resources == r
    assert spec_from_json(spec_to_json(spec)).containers[0].resources == r


def test_a_registry_record_written_before_hugepages_still_reads() -> None:
    spec = parse_manifest(doc({"limits": {"memory": "512Mi"}})).pod
    d = spec_to_json(spec)
    assert "hugepages" not in d["containers"][0]["resources"]
    assert spec_from_json(d).containers[0].resources.hugepages == {}


@pytest.mark.parametrize("resources,where,words", [
    ({"requests": {"hugepages-2Mi": "64Mi"}}, "limits.hugepages-2Mi", "must be set for hugepages"),
    ({"requests": {"hugepages-2Mi": "32Mi"}, "limits": {"hugepages-2Mi": "64Mi"}}, "requests.hugepages-2Mi",
     "must equal the limit"),
    ({"limits": {"hugepages-2Mi": "0.5"}}, "limits.hugepages-2Mi", "whole number of bytes"),
    ({"limits": {"hugepages-2Xi": "2Mi"}}, "limits.hugepages-2Xi", "unknown resource"),
])
def test_bad_hugepages_are_refused(resources: dict[str, Any], where: str, words: str) -> None:
    with pytest.raises(ManifestError) as e:
        parse_manifest(doc(resources))
    assert where in str(e.value) and words in str(e.value)
