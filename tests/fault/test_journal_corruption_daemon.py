"""Issue 22 item 1 end to end: a real ``hwagent run`` killed with -9 after 137
journaled CPU changes, one bit flipped in the middle of its CPU journal.

Before the fix the next start replayed records 1-68, cut the rest and served
about half of the acknowledged containers, reporting one ``journal tail
discarded`` line. Now the daemon refuses to start, names the file and says what
to do; with ``[cpu] accept_state_loss = true`` it starts empty with snapshot and
journal kept aside whole. A flip in the last record is a torn tail and still
starts (that record may be cut; every earlier one is served).
"""

from __future__ import annotations

import grpc
import pytest

from agent.api.resourceplugin.v1alpha1 import api_pb2 as pb
from agent.api.resourceplugin.v1alpha1 import api_pb2_grpc as pb_grpc
from agent.cpu.qos import QOS_KEY
from agent.journal import parse_frames
from tests.fault.conftest import COUNTS
from tests.fault.daemon import CONFIG, RunningDaemon

pytestmark = pytest.mark.fault

ALLOCS = 103
REMOVES = 34  # 137 journaled changes


def _changes(d: RunningDaemon) -> set[str]:
    """Allocate ALLOCS shared containers, remove REMOVES of them: what must be served after."""
    with grpc.insecure_channel(f"unix://{d.sockets.cpu}") as ch:
        stub = pb_grpc.ResourcePluginStub(ch)
        for i in range(ALLOCS):
            stub.Allocate(pb.ResourceRequest(
                pod_uid=f"pod-{i}", pod_namespace="ns", pod_name=f"p{i}", container_name="c",
                container_type=pb.MAIN, resource_name="cpu", resource_requests={"cpu": 0.1},
                annotations={QOS_KEY: "shared_cores"}), timeout=60)
        for i in range(0, 2 * REMOVES, 2):
            stub.RemovePod(pb.RemovePodRequest(pod_uid=f"pod-{i}"), timeout=60)
    return {f"pod-{i}" for i in range(ALLOCS)} - {f"pod-{i}" for i in range(0, 2 * REMOVES, 2)}


def _served(d: RunningDaemon) -> set[str]:
    with grpc.insecure_channel(f"unix://{d.sockets.cpu}") as ch:
        r = pb_grpc.ResourcePluginStub(ch).GetResourcesAllocation(pb.GetResourcesAllocationRequest(), timeout=60)
    return set(r.pod_resources)


def _flip(wal, record: int) -> None:
    raw = wal.read_bytes()
    frames, _, why = parse_frames(raw)
    assert why is None and len(frames) >= 137, (len(frames), why)
    end = frames[record - 1][2]
    start = end - len(frames[record - 1][1])  # the record's payload
    b = bytearray(raw)
    b[start + len(frames[record - 1][1]) // 2] ^= 0x10
    wal.write_bytes(bytes(b))


def test_a_flipped_bit_mid_journal_refuses_the_start_and_accepting_the_loss_keeps_it_aside(short_dir, daemon_factory):
    d = daemon_factory(short_dir)
    expected = _changes(d)
    assert _served(d) >= expected
    d.kill9()
    wal = d.root / "cpu" / "cpu_plugin_state.json.wal"
    pristine = wal.read_bytes()
    frames = parse_frames(pristine)[0]
    assert len(frames) >= 137

    _flip(wal, 69)
    bad = wal.read_bytes()
    trial = RunningDaemon.start(short_dir, wait=False)
    try:
        rc = trial.ready_or_exit()
        log = trial.log()
    finally:
        trial.cleanup()
    assert rc not in (None, 0), "the daemon started on a journal corrupt in the middle"
    assert "cpu_plugin_state.json" in log and "corrupt in the middle" in log and "accept_state_loss" in log, log[-3000:]
    assert wal.read_bytes() == bad  # refused: nothing cut, nothing moved
    COUNTS["journal corruption daemon: refused starts"] += 1

    accepting = CONFIG.replace("[cpu]\n", "[cpu]\naccept_state_loss = true\n")
    d2 = daemon_factory(short_dir, config=accepting)
    assert _served(d2) == set()  # started empty, not with half of the containers
    kept = sorted(p.name.split(".corrupt-")[0] for p in wal.parent.glob("*.corrupt-*"))
    assert "cpu_plugin_state.json.wal" in kept, kept
    (aside,) = [p for p in wal.parent.glob("cpu_plugin_state.json.wal.corrupt-*")]
    assert aside.read_bytes() == bad  # the evidence whole
    assert d2.stop() == 0


def test_a_flip_in_the_last_record_is_a_torn_tail_and_the_daemon_starts(short_dir, daemon_factory):
    d = daemon_factory(short_dir)
    expected = _changes(d)
    d.kill9()
    wal = d.root / "cpu" / "cpu_plugin_state.json.wal"
    n = len(parse_frames(wal.read_bytes())[0])
    _flip(wal, n)  # the last record: a RemovePod of pod-66
    d2 = daemon_factory(short_dir)
    served = _served(d2)
    assert served == expected | {"pod-66"}, sorted(served ^ expected)
    assert "journal tail discarded" in d2.log()
    assert d2.stop() == 0
