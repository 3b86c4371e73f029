"""Pods that reference ResourceClaims: spec.resourceClaims and resources.claims parsed,
checked against each other, stored and written back."""

from __future__ import annotations

import pytest

from agent.workloads.codec import spec_from_json, spec_to_json
from agent.workloads.manifest import ManifestError, manifest_of, pod_from_document


def _pod(claims=None, used=None) -> dict:
    ctr: dict = {"name": "main", "command": ["true"]}
    if used is not None:
        ctr["resources"] = {"claims": used}
    spec: dict = {"containers": [ctr]}
    if claims is not None:
        spec["resourceClaims"] = claims
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "claimer", "uid": "u1"}, "spec": spec}


def test_claims_parse_and_roundtrip() -> None:
    pod = pod_from_document(_pod([{"name": "scratch", "resourceClaimName": "disk"}], [{"name": "scratch"}])).pod
    assert pod.name == "claimer"  # a container's claim name does not become the pod's
    assert pod.resource_claims == {"scratch": "disk"}
    assert pod.containers[0].resources.claims == ("scratch",)
    assert pod_from_document(manifest_of(pod)).pod == pod
    assert spec_from_json(spec_to_json(pod)) == pod


@pytest.mark.parametrize("claims,used,where", [
    ([{"name": "a", "resourceClaimName": "disk"}], [{"name": "b"}], "spec.containers[0].resources.claims[0].name"),
    ([{"name": "a", "resourceClaimTemplateName": "t"}], None, "spec.resourceClaims[0].resourceClaimTemplateName"),
    ([{"name": "a"}], None, "spec.resourceClaims[0].resourceClaimName"),
    ([{"name": "a", "resourceClaimName": "../x"}], None, "spec.resourceClaims[0].resourceClaimName"),
    ([{"name": "a", "resourceClaimName": "d"}, {"name": "a", "resourceClaimName": "e"}], None,
     "spec.resourceClaims[1].name"),
    ([{"name": "a", "resourceClaimName": "d"}], [{"name": "a", "request": "r"}],
     "spec.containers[0].resources.claims[0].request"),
])
def test_bad_claim_references_name_the_field(claims, used, where) -> None:
    with pytest.raises(ManifestError) as e:
        pod_from_document(_pod(claims, used))
    assert e.value.field == where
