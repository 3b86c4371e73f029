"""Checkpoints with a valid checksum but impossible content (issue 10, defect
7) are corrupt: the cpu policy refuses to start on them unless the loss is
accepted (then they are kept aside), the device host keeps them aside and
starts empty; both count/report it. Their journals get the same checks per
record. Stale temp files beside both are removed at start (defect 8)."""

from __future__ import annotations

import asyncio
import json

import pytest
from prometheus_client import REGISTRY

from agent.cpu.checkpoint import CheckpointError, CheckpointStore, encode
from agent.cpu.state import PolicyState
from agent.contracts.cpu import AllocationInfo
from agent.cpuset import CPUSet
from agent.devicemanager.checkpoint import encode as encode_devices, load as load_devices
from agent.contracts.devices import CheckpointData
from agent.devicemanager.manager import DeviceManager
from agent.contracts.devices import Allocation
from agent.journal import frame

try:
    from ._durable_helpers import ONLINE
except ImportError:
    from _durable_helpers import ONLINE

pytestmark = pytest.mark.fault


def _entry(uid, qos="dedicated_cores", cpus="4-5", **kw):
    base = dict(pod_uid=uid, pod_namespace="ns", pod_name=uid, container_name="c", container_type="MAIN",
                container_index=0, qos_level=qos, request_quantity=2.0, cpuset=CPUSet.parse(cpus),
                owner_pool_name="dedicated", numa_binding=True)  # fmt: skip
    base.update(kw)
    return AllocationInfo(**base)


def _state(*entries, pools=None):
    return PolicyState(pools=pools or {"reserve": CPUSet.parse("0,16")},
                       entries={a.pod_uid: {a.container_name: a} for a in entries})


BAD_STATES = {
    "two dedicated share a cpu": (_state(_entry("a"), _entry("b", cpus="5-6")), "two dedicated"),
    "cpu the machine lacks": (_state(_entry("a", cpus="4,99")), "do not exist"),
    "unknown qos level": (_state(_entry("a", qos="turbo_cores")), "unknown QoS"),
    "unknown container type": (_state(_entry("a", container_type="GHOST")), "unknown container type"),
    "negative quantity": (_state(_entry("a", request_quantity=-1.0)), "negative"),
    "dedicated inside the reserve pool": (_state(_entry("a", cpus="0-1")), "overlaps dedicated"),
    "dedicated inside a shared pool": (_state(_entry("a"), pools={"reserve": CPUSet.parse("0"),
                                                                  "share": CPUSet.parse("2-7")}), "overlaps"),
    "entry under another key": (PolicyState(entries={"x": {"c": _entry("a")}}), "another key"),
    "a pool inside the reserve": (_state(_entry("a"), pools={"reserve": CPUSet.parse("0,16"),
                                                             "share": CPUSet.parse("8-12,16")}), "reserve pool"),
}


@pytest.mark.parametrize("name", sorted(BAD_STATES))
def test_cpu_snapshot_with_a_valid_checksum_but_impossible_content(tmp_path, name):
    st, why = BAD_STATES[name]
    store = CheckpointStore(tmp_path, online=ONLINE)
    store.path.write_bytes(encode(st))
    with pytest.raises(CheckpointError, match=why):
        store.load()
    assert store.path.exists()  # refused, nothing moved: the operator decides
    assert store.load(accept_loss=True) is None
    assert not store.path.exists() and list(tmp_path.glob("cpu_plugin_state.json.corrupt-*"))


def test_cpu_journal_record_with_impossible_content_is_refused(tmp_path):
    """A whole record (its checksum verifies) that the policy cannot apply is no
    torn tail: the journal is refused, or given up whole with the operator's
    acceptance; never replayed up to that record only."""
    good = _state(_entry("a"))
    store = CheckpointStore(tmp_path, online=ONLINE)
    store.path.write_bytes(encode(good, 0))
    bad = {"put": [_entry("b", qos="turbo_cores").to_json()]}
    ok = {"put": [_entry("c", cpus="8-9").to_json()]}
    (tmp_path / "cpu_plugin_state.json.wal").write_bytes(
        frame(1, json.dumps(ok).encode()) + frame(2, json.dumps(bad).encode()))
    with pytest.raises(CheckpointError, match="record 2 refused.*accept_state_loss"):
        store.load()
    assert store.path.exists() and (tmp_path / "cpu_plugin_state.json.wal").exists()  # refused: nothing moved
    assert CheckpointStore(tmp_path, online=ONLINE).load(accept_loss=True) is None
    assert len(list(tmp_path.glob("cpu_plugin_state.json*.corrupt-*"))) == 2
    # records valid one by one but together impossible: the journal is not trusted
    store.path.write_bytes(encode(good, 0))
    clash = {"put": [_entry("d", cpus="9-10").to_json()]}
    (tmp_path / "cpu_plugin_state.json.wal").write_bytes(
        frame(1, json.dumps(ok).encode()) + frame(2, json.dumps(clash).encode()))
    with pytest.raises(CheckpointError, match="two dedicated"):
        CheckpointStore(tmp_path, online=ONLINE).load()


def _dalloc(uid, container, ctype, devs, resource="example.com/r"):
    return Allocation(uid, "ns", uid, container, ctype, resource, tuple((d, (0,)) for d in devs), b"")


def _corrupt_count() -> float:
    return REGISTRY.get_sample_value("hwagent_device_manager_checkpoint_errors_total", {"kind": "corrupt"}) or 0.0


@pytest.mark.parametrize("allocs,ok", [
    ((_dalloc("p", "a", "app", ["d1"]), _dalloc("q", "a", "app", ["d1"])), False),  # two pods, one device
    ((_dalloc("p", "a", "app", ["d1"]), _dalloc("p", "b", "app", ["d1"])), False),  # two app containers
    ((_dalloc("p", "i", "init", ["d1"]), _dalloc("p", "a", "app", ["d1"])), True),  # init reuse
    ((_dalloc("p", "i", "init", ["d1"]), _dalloc("p", "j", "init", ["d1"]), _dalloc("p", "a", "app", ["d1"])), True),
    ((_dalloc("p", "i", "init", ["d1"]), _dalloc("q", "a", "app", ["d1"])), False),  # reuse is per pod
    ((_dalloc("p", "a", "app", ["d1", "d1"]),), False),
    ((_dalloc("", "a", "app", ["d1"]),), False),
    ((_dalloc("p", "a", "app", ["d1"]), _dalloc("p", "a", "app", ["d2"])), False),  # one key twice
])
def test_device_checkpoint_meaning(tmp_path, allocs, ok):
    path = tmp_path / "checkpoint"
    path.write_bytes(encode_devices(CheckpointData(allocations=allocs)))
    before = _corrupt_count()
    data = load_devices(path)
    if ok:
        assert data is not None and len(data.allocations) == len(allocs)
    else:
        assert data is None and _corrupt_count() == before + 1
        assert list(tmp_path.glob("checkpoint.corrupt-*"))


def test_owners_remove_stale_temp_files_at_start(tmp_path):
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    store = CheckpointStore(cpu, online=ONLINE)
    store.save(_state(_entry("a")))
    for i in range(40):  # what 100 kills during writes left behind
        (cpu / f".cpu_plugin_state.json.tmp-{10_000 + i}").write_bytes(b"{partial")
    assert set(store.load().entries) == {"a"}
    assert not list(cpu.glob(".*tmp-*"))

    dp = tmp_path / "dp"
    dp.mkdir()
    (dp / ".checkpoint.tmp-31337").write_bytes(b"{")
    (dp / ".checkpoint.wal.tmp-31338").write_bytes(b"")

    async def main():
        m = DeviceManager(numa_ids=(0,), checkpoint_path=dp / "checkpoint")
        await m.start()
        await m.stop()

    asyncio.run(main())
    assert not list(dp.glob(".*tmp-*")) and (dp / "checkpoint").exists()
