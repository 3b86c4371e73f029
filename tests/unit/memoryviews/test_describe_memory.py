"""`describe` shows each container's memory blocks per NUMA node, asked of the
memory manager when the API answers (as CPUs are asked of the CPU policy): the
admission API's Container.memory, its JSON, and describe's text."""

from __future__ import annotations

import argparse
from unittest import mock

from agent.commands import describe
from agent.contracts.pods import PodStatus
from agent.workloads.podjson import pod_json
from agent.workloads.server import pod_message
from agent.workloads.store import PodRecord
from tests.unit.memoryviews.fake import GI, MI, two_nodes
from tests.unit.workloads.test_store import _pod


def _shown(rec: PodRecord, memory) -> dict:
    return pod_json(pod_message(rec, memory=memory), record=True)


def test_the_api_and_describe_show_each_containers_blocks_from_the_manager(capsys):
    fake = two_nodes()
    fake.held[("u1", "main")] = fake.held.pop(("u1", "app"))
    fake.held[("u1", "init")] = (fake.held.pop(("u2", "big"))[0],)
    rec = PodRecord(_pod("u1"), PodStatus(), released=False)
    doc = _shown(rec, fake.blocks)
    by = {c["name"]: c["memory"] for c in doc["containers"]}
    assert by["main"] == [
        {"resource": "memory", "size": 512 * MI, "numa_nodes": [0], "per_node": {"0": 512 * MI}},
        {"resource": "hugepages-2Mi", "size": 64 * MI, "numa_nodes": [0], "per_node": {"0": 64 * MI}},
    ]
    assert by["init"] == [{"resource": "memory", "size": 5 * GI, "numa_nodes": [0, 1],
                           "per_node": {"0": 3 * GI, "1": 2 * GI}}]

    # the manager's answer now, not a copy: a change there is what the next answer shows
    fake.held[("u1", "main")] = fake.held[("u1", "main")][:1]
    assert len({c["name"]: c for c in _shown(rec, fake.blocks)["containers"]}["main"]["memory"]) == 1
    # a released pod holds nothing
    assert all(c["memory"] == [] for c in _shown(PodRecord(rec.pod, rec.status, released=True),
                                                 fake.blocks)["containers"])
    # without a memory manager in the daemon: no blocks
    assert all(c["memory"] == [] for c in _shown(rec, None)["containers"])

    args = argparse.Namespace(namespace="default", name="web", format="text")
    with mock.patch.object(describe, "call", return_value={"pod": doc}):
        assert describe.run(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert "    memory: memory 5Gi on NUMA 0,1 (0=3Gi, 1=2Gi)" in out
    assert "    memory: memory 512Mi on NUMA 0" in out
    assert "    memory: hugepages-2Mi 64Mi on NUMA 0" in out
