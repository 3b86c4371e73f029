"""Per-entry memory of the state the daemon holds per pod (issue 24: RSS at 10,000 pods
at most 2x the RSS at 10).

A restart decodes every entry from its own JSON text, so each value of each entry
starts as its own string and map. What every entry repeats (namespace, QoS level,
container type, pool, the same label and annotation maps) must be held once; what an
entry owns is its own object, its pod's uid and name and its two numbers. The bound
is computed from that structure with sys.getsizeof, not measured and pasted."""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from typing import Any

from agent.contracts.cpu import AllocationInfo
from agent.contracts.pods import AdmittedPod, ContainerAssignment
from agent.cpuset import CPUSet
from agent.workloads.manifest import parse_manifest
from agent.workloads.store import PodRecord, decode, encode

N = 1000


def _cpu_entry(i: int) -> dict[str, Any]:
    return {
        "annotations": {"cpuset_pool": "batch", "katalyst.kubewharf.io/qos_level": "shared_cores"},
        "cgroup_path": None, "container_index": 0, "container_name": "app", "container_type": "MAIN",
        "cpuset": "1-2,5-6", "init_timestamp": 1000000.0 + i,
        "labels": {"katalyst.kubewharf.io/qos_level": "shared_cores"}, "native_qos_class": "",
        "numa_binding": False, "numa_exclusive": False, "owner_pool_name": "batch",
        "pod_name": f"pod-{i:05d}", "pod_namespace": "default", "pod_role": "", "pod_type": "",
        "pod_uid": f"uid-{i:05d}", "qos_level": "shared_cores", "ramp_up": False, "request_quantity": 0.1 + i,
    }


def _own_bytes(a: AllocationInfo) -> int:
    """What one entry owns: its object (and its attribute storage, if it has a dict),
    its uid and name, its two floats, and its slot in the list holding it."""
    attrs = sys.getsizeof(vars(a)) if hasattr(a, "__dict__") else 0
    return (sys.getsizeof(a) + attrs + sys.getsizeof(a.pod_uid) + sys.getsizeof(a.pod_name)
            + sys.getsizeof(a.init_timestamp) + sys.getsizeof(a.request_quantity) + 8)


def test_cpu_entries_hold_only_what_each_owns() -> None:
    text = json.dumps([_cpu_entry(i) for i in range(N)])
    AllocationInfo.from_json(json.loads(text)[0])  # warm: the shared values exist before the count
    gc.collect()
    tracemalloc.start()
    try:
        entries = [AllocationInfo.from_json(d) for d in json.loads(text)]
        gc.collect()
        traces = tracemalloc.take_snapshot().traces
    finally:
        tracemalloc.stop()
    # what the decoding allocated and still holds, block by block; a block over 16 KiB is a
    # table that grew once (the interpreter's interned strings, when earlier tests filled it), not an entry
    held = sum(t.size for t in traces if t.size <= 16384)
    own = sum(_own_bytes(a) for a in entries)
    # 25 % for the allocator's rounding and the list's over-allocation
    assert held <= own * 1.25, f"{held / N:.0f} B per entry held, {own / N:.0f} B owned"
    a, b = entries[0], entries[1]
    assert a.labels is b.labels and a.annotations is b.annotations
    assert a.qos_level is b.qos_level and a.pod_namespace is b.pod_namespace
    assert a.labels == {"katalyst.kubewharf.io/qos_level": "shared_cores"}


def test_decoded_entries_with_other_labels_do_not_share_them() -> None:
    a = AllocationInfo.from_json(_cpu_entry(0))
    d = _cpu_entry(1)
    d["labels"] = {"katalyst.kubewharf.io/qos_level": "dedicated_cores"}
    b = AllocationInfo.from_json(d)
    assert b.labels == {"katalyst.kubewharf.io/qos_level": "dedicated_cores"} != a.labels


def test_pod_records_share_what_every_pod_repeats() -> None:
    def record(name: str) -> PodRecord:
        doc = {"metadata": {"name": name}, "spec": {"containers": [
            {"name": "app", "command": ["sleep", "1"], "resources": {"requests": {"cpu": "100m"}}}]}}
        spec = parse_manifest(json.dumps(doc).encode()).pod
        assign = {"app": ContainerAssignment(name="app", cpus=CPUSet.parse("1-3"), mems=None, numa_affinity=None)}
        return PodRecord(AdmittedPod(spec=spec, qos="shared", assignments=assign, admitted_at=1.0))

    r0, r1 = (decode(encode(record(f"p{i}"))) for i in range(2))
    s0, s1 = r0.pod.spec, r1.pod.spec
    assert s0.namespace is s1.namespace and s0.restart_policy is s1.restart_policy and s0.source is s1.source
    assert s0.labels is s1.labels and s0.annotations is s1.annotations
    assert s0.containers[0].name is s1.containers[0].name
    assert r0.pod.qos is r1.pod.qos


def test_device_allocations_share_names_with_the_cpu_entries() -> None:
    from agent.contracts.devices import Allocation, CheckpointData  # noqa: PLC0415
    from agent.devicemanager import checkpoint  # noqa: PLC0415

    def alloc(i: int) -> Allocation:
        return Allocation(pod_uid=f"uid-{i:05d}", pod_namespace="default", pod_name=f"pod-{i:05d}",
                          container_name="app", container_type="app", resource="example.com/dev",
                          devices=((f"dev-{i}", (0,)),), response=b"")

    cp = checkpoint.decode(checkpoint.encode(CheckpointData(allocations=(alloc(0), alloc(1)), registered={})))
    a, b = cp.allocations
    assert a.pod_namespace is b.pod_namespace and a.resource is b.resource and a.container_type is b.container_type
    cpu = AllocationInfo.from_json(_cpu_entry(0))
    assert a.pod_uid is cpu.pod_uid and a.pod_name is cpu.pod_name


def test_the_device_table_holds_one_key_per_allocation_and_no_set_per_pod() -> None:
    """PodDevices indexes each allocation by pod and by device. It held a fresh key tuple
    per index and a one-element set per pod and per device (216 B each): about 7 MB of
    the 10,000-pod table. Its own bytes: the three dicts, one key per allocation and a
    one-element tuple per pod and per device."""
    from agent.contracts.devices import Allocation  # noqa: PLC0415
    from agent.devicemanager.pod_devices import PodDevices  # noqa: PLC0415

    allocs = [Allocation(pod_uid=f"uid-{i:05d}", pod_namespace="default", pod_name=f"pod-{i:05d}",
                         container_name="app", container_type="app", resource="example.com/dev",
                         devices=((f"dev-{i:05d}", (0,)),), response=b"") for i in range(N)]
    gc.collect()
    tracemalloc.start()
    try:
        table = PodDevices()
        for a in allocs:
            table.insert(a)
        gc.collect()
        traces = tracemalloc.take_snapshot().traces
    finally:
        tracemalloc.stop()
    held = sum(t.size for t in traces)
    key = allocs[0].key
    dicts = [table._allocs, table._by_pod, *table._holders.values(), table._holders]
    own = sum(sys.getsizeof(d) for d in dicts) + N * (sys.getsizeof(key) + 2 * sys.getsizeof((key,)))
    assert held <= own * 1.25, f"{held / N:.0f} B per allocation held, {own / N:.0f} B owned"
    a = allocs[7]
    assert table.pods()[7] == a.pod_uid and table.container_devices(a.pod_uid, "app", a.resource) == ("dev-00007",)
    assert table.remove_pod(a.pod_uid) == [a.key] and not table.in_use(a.resource, "dev-00007")
    assert len(table) == N - 1 and a.pod_uid not in table.pods()
