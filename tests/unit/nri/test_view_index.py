"""The node view drops a removed pod's containers through its pod index, not a pass over
every container (issue 34: per-event work O(what changed)); what it keeps must be exactly
what a pass would have kept, through Synchronize and every event."""

from __future__ import annotations

from agent.api.nri.v1alpha1 import api_pb2 as nri
from agent.nri.view import NodeView


def _pod(i: int) -> nri.PodSandbox:
    return nri.PodSandbox(id=f"pod{i}", name=f"web-{i}", namespace="default", uid=f"uid-{i}")


def _ctr(cid: str, pod: int) -> nri.Container:
    return nri.Container(id=cid, pod_sandbox_id=f"pod{pod}", name=cid, state=nri.CONTAINER_RUNNING)


def test_a_removed_pod_takes_exactly_its_containers_with_it() -> None:
    v = NodeView()
    v.synchronize([_pod(i) for i in range(3)], [_ctr(f"c{i}", i % 3) for i in range(9)])
    v.container_event(nri.CREATE_CONTAINER, _pod(1), _ctr("late", 1))  # after Synchronize
    v.container_event(nri.REMOVE_CONTAINER, _pod(1), _ctr("c4", 1))  # gone before its pod
    v.pod_event(nri.REMOVE_POD_SANDBOX, _pod(1))
    assert sorted(v.containers) == ["c0", "c2", "c3", "c5", "c6", "c8"]
    assert all(c.pod_id != "pod1" for c in v.containers.values())
    v.container_event(nri.CREATE_CONTAINER, _pod(1), _ctr("again", 1))  # a pod id reused
    v.pod_event(nri.REMOVE_POD_SANDBOX, _pod(0))
    assert sorted(v.containers) == ["again", "c2", "c5", "c8"]
    v.synchronize([_pod(2)], [_ctr("c2", 2)])  # the runtime's whole list replaces the index too
    v.pod_event(nri.REMOVE_POD_SANDBOX, _pod(2))
    assert v.containers == {}
