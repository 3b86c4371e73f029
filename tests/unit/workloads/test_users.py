"""Who a pod runs as and who sees it (agent.workloads.users), and the manifest's securityContext."""

from __future__ import annotations

import pytest

from agent.contracts.pods import PodSpec, RunAs
from agent.workloads.codec import spec_from_json, spec_to_json
from agent.workloads.errors import AdmissionError
from agent.workloads.manifest import ManifestError, manifest_of, pod_from_document
from agent.workloads.users import ROOT, Caller, UserDB, may_see, resolve_run_as

DB = UserDB(user=lambda uid: {1001: ("alice", 1001)}.get(uid), groups=lambda name, gid: [gid, 50])
ALICE = Caller(1001, 1001, (1001, 995))


def test_root_runs_as_root_unless_it_names_a_user():
    assert resolve_run_as(ROOT, None, DB) is None
    assert resolve_run_as(ROOT, RunAs(1001), DB) == RunAs(1001, 1001, (1001, 50))
    assert resolve_run_as(ROOT, RunAs(1001, 7, (8,)), DB) == RunAs(1001, 7, (8, 1001, 50))
    assert resolve_run_as(ROOT, RunAs(4242, 4242), DB) == RunAs(4242, 4242, ())
    with pytest.raises(AdmissionError, match="no passwd entry") as e:
        resolve_run_as(ROOT, RunAs(4242), DB)
    assert e.value.code == "INVALID_ARGUMENT"


def test_a_member_runs_as_itself_with_its_groups():
    assert resolve_run_as(ALICE, None, DB) == RunAs(1001, 1001, (1001, 995))
    assert resolve_run_as(ALICE, RunAs(1001, 995), DB) == RunAs(1001, 995, (1001, 995))


@pytest.mark.parametrize("asked", [RunAs(0), RunAs(1002), RunAs(None, 0), RunAs(1001, 1001, (0,))])
def test_a_member_cannot_name_anyone_else(asked):
    with pytest.raises(AdmissionError) as e:
        resolve_run_as(ALICE, asked, DB)
    assert e.value.code == "PERMISSION_DENIED"


def _spec(run_as: RunAs | None) -> PodSpec:
    return PodSpec("p", "default", "u1", containers=(), run_as=run_as)


def test_a_pod_is_its_users():
    assert may_see(ROOT, _spec(RunAs(1001, 1001)))
    assert may_see(ALICE, _spec(RunAs(1001, 1001)))
    assert not may_see(ALICE, _spec(None))
    assert not may_see(Caller(1002, 1002), _spec(RunAs(1001, 1001)))


def test_security_context_round_trips_and_is_bounded():
    doc = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "command": ["true"]}],
                                               "securityContext": {"runAsUser": 1001, "supplementalGroups": [5, 5]}}}
    spec = pod_from_document(doc).pod
    assert spec.run_as == RunAs(1001, None, (5,))
    assert pod_from_document(manifest_of(spec)).pod == spec
    assert spec_from_json(spec_to_json(spec)) == spec
    old = spec_to_json(spec)
    del old["run_as"]  # a record from before users: root
    assert spec_from_json(old).run_as is None
    for bad in ({"runAsUser": -1}, {"runAsUser": "root"}, {"runAsGroup": 1 << 32}, {"fsGroup": 1}):
        with pytest.raises(ManifestError, match="securityContext"):
            pod_from_document({**doc, "spec": {**doc["spec"], "securityContext": bad}})
