"""Publishing the node's ResourceSlices to the API server (``[dra] kubeconfig``).

The API server must hold exactly this node's slices of this driver: the ones
``agent.dra.slices`` builds, nothing else. ``plan`` (pure) compares what should
be with what the server lists (``spec.nodeName`` and ``spec.driver`` field
selectors, so other nodes' and other drivers' slices are never seen, let alone
touched) and says what to create, update and delete. ``SlicePublisher`` carries
it out, and on a 409 (another writer changed a slice since the list, or a create
raced one) lists again and re-plans, a few times, as upstream's resourceslice
controller does.

A pool's ``generation`` is bumped whenever its slice's content changes, so a
scheduler that sees two generations of one pool knows which is current. A slice
the server stores differently from how it was sent (defaulted fields, quantities
normalised) would look changed at every comparison; the publisher remembers,
per slice, the resourceVersion its own write produced and the spec it sent, and
an unchanged pair is not written again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.dra.kubeapi import KubeApi, KubeError

__all__ = ["MANAGED_BY", "Plan", "plan", "SlicePublisher", "MAX_TRIES"]

#: the label hwagent sets on the slices it publishes (for people and kubectl; selection is by field)
MANAGED_BY = {"app.kubernetes.io/managed-by": "hwagent"}
#: list-plan-apply rounds before a conflict is given up on (the next sync tries again)
MAX_TRIES = 5

#: slice name -> (resourceVersion our write produced, the spec we sent without its generation)
Memo = dict[str, tuple[str, Any]]


@dataclass(frozen=True)
class Plan:
    create: list[dict[str, Any]] = field(default_factory=list)
    update: list[dict[str, Any]] = field(default_factory=list)
    #: (name, uid): deleted with a uid precondition, so a slice re-created meanwhile stays
    delete: list[tuple[str, str]] = field(default_factory=list)


def _unversioned(spec: Mapping[str, Any]) -> Any:
    out = copy.deepcopy(dict(spec))
    out["pool"] = {k: v for k, v in dict(out.get("pool") or {}).items() if k != "generation"}
    return out


def _generation(doc: Mapping[str, Any]) -> int:
    try:
        return int(doc["spec"]["pool"]["generation"])
    except (KeyError, TypeError, ValueError):
        return 0


def plan(desired: Sequence[Mapping[str, Any]], existing: Sequence[Mapping[str, Any]], memo: Mapping[str, Any],
         owner: Mapping[str, Any] | None = None) -> Plan:
    """What turns ``existing`` (this node's and driver's slices as listed) into ``desired``;
    created and updated slices carry ``owner`` as their owner reference when given."""
    have = {s["metadata"]["name"]: s for s in existing}
    out = Plan()
    for want in desired:
        name = want["metadata"]["name"]
        doc = copy.deepcopy(dict(want))
        doc["metadata"] = {**doc["metadata"], "labels": {**doc["metadata"].get("labels", {}), **MANAGED_BY}}
        if owner:
            doc["metadata"]["ownerReferences"] = [dict(owner)]
        spec = _unversioned(want["spec"])
        cur = have.get(name)
        if cur is None:
            same_pool = [_generation(s) for s in existing if s["spec"]["pool"]["name"] == want["spec"]["pool"]["name"]]
            doc["spec"]["pool"]["generation"] = max(same_pool, default=0) + 1
            out.create.append(doc)
            continue
        rv = str(cur["metadata"].get("resourceVersion", ""))
        if _unversioned(cur["spec"]) == spec or memo.get(name) == (rv, spec):
            continue
        doc["metadata"]["resourceVersion"] = rv
        doc["spec"]["pool"]["generation"] = _generation(cur) + 1
        out.update.append(doc)
    wanted = {s["metadata"]["name"] for s in desired}
    out.delete.extend((n, str(s["metadata"].get("uid", ""))) for n, s in sorted(have.items()) if n not in wanted)
    return out


class SlicePublisher:
    """Makes the API server hold exactly ``desired`` for one node and driver (blocking calls:
    run it in a worker thread). The client is made on first use and kept."""

    def __init__(self, connect: Callable[[], KubeApi], node: str, driver: str) -> None:
        self._connect = connect
        self._api: KubeApi | None = None
        self.node = node
        self.driver = driver
        self._memo: Memo = {}
        #: the Node as the slices' owner reference; {} when it cannot be read (403, 404): published unowned
        self.owner: dict[str, Any] | None = None

    def sync(self, desired: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        """List, plan, apply; on a 409 again from the list. Returns what was written (counts);
        ``KubeError`` when the server is unreachable or refuses (nothing more is tried this round)."""
        if self._api is None:
            self._api = self._connect()
        api = self._api
        if self.owner is None:
            self.owner = self._node_owner(api)
        for attempt in range(MAX_TRIES):
            p = plan(desired, api.list_slices(self.node, self.driver), self._memo, self.owner)
            try:
                for name, uid in p.delete:
                    api.delete_slice(name, uid)
                    self._memo.pop(name, None)
                for doc in p.create:
                    self._remember(doc, api.create_slice(doc))
                for doc in p.update:
                    self._remember(doc, api.replace_slice(doc))
            except KubeError as e:
                if e.status == 409 and attempt + 1 < MAX_TRIES:
                    continue
                raise
            return {"created": len(p.create), "updated": len(p.update), "deleted": len(p.delete),
                    "tries": attempt + 1}
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _node_owner(self, api: KubeApi) -> dict[str, Any]:
        """The Node as owner (upstream's kubelet plugin helper does the same), so deleting the node
        collects its slices. Not allowed to read it (RBAC) or no such Node: published without one."""
        try:
            uid = api.node_uid(self.node)
        except KubeError as e:
            if e.status in (403, 404):
                return {}
            raise
        return {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": uid, "controller": True} if uid else {}

    def _remember(self, sent: Mapping[str, Any], got: Mapping[str, Any]) -> None:
        rv = str(dict(got.get("metadata") or {}).get("resourceVersion", ""))
        self._memo[sent["metadata"]["name"]] = (rv, _unversioned(sent["spec"]))
