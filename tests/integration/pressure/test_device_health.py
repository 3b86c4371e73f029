"""Real block errors -> device Unhealthy -> healthy again after a quiet period.

A loop device over a sparse file on a 1 MiB tmpfs: direct writes past the
tmpfs capacity fail in the loop driver, which the kernel reports as
block_rq_error: error -28 (ENOSPC) on current kernels, -5 (EIO) on 6.1, as the
VM tier's Debian guest showed. (device-mapper's error target would be a second
source, but this kernel has no device-mapper.)
"""

from __future__ import annotations

import errno as errnos
import subprocess
import time
from pathlib import Path

import pytest

from agent.pressure.config import PressureConfig
from agent.pressure.engine import PressureEngine

pytestmark = [pytest.mark.root, pytest.mark.bpf]

#: what the loop driver reports for a write past its full backing file
LOOP_FULL_ERRNOS = {errnos.ENOSPC, errnos.EIO}


class FakeBoard:
    """The part of ``DeviceHealth`` (``DEVICE_HEALTH``) the pressure engine uses."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, bool, str, str]] = []

    def set_health_for(self, kind, key, healthy, reason, source):
        self.calls.append((kind, key, healthy, reason, source))
        return [f"{kind}-{key}"]


@pytest.fixture
def failing_loop(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    dev = None
    try:
        backing = mnt / "disk.img"
        subprocess.run(["truncate", "-s", "8M", str(backing)], check=True)
        dev = subprocess.run(["losetup", "-f", "--show", str(backing)], check=True, capture_output=True,
                             text=True).stdout.strip()
        key = Path(f"/sys/block/{Path(dev).name}/dev").read_text().strip()
        yield dev, key
    finally:
        if dev:
            subprocess.run(["losetup", "-d", dev], check=False)
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def write_past_capacity(dev: str) -> None:
    subprocess.run(["dd", "if=/dev/zero", f"of={dev}", "bs=64k", "count=64", "oflag=direct"],
                   capture_output=True, check=False)


def test_enospc_marks_block_device_unhealthy_then_recovers(probe_set, failing_loop):
    dev, key = failing_loop
    board = FakeBoard()
    cfg = PressureConfig(error_threshold=1, error_window_s=30, recovery_s=1.0)
    eng = PressureEngine(cfg, device_health=board, probes=probe_set)
    eng.load()
    eng.tick()  # baseline: the shared probe set's counters may hold earlier tests' errors
    assert not [c for c in board.calls if c[1] == key]
    write_past_capacity(dev)
    eng.tick()
    errs = {k: n for k, n in eng.last_block.errors.items() if k[0] == key}
    assert errs and all(errno in LOOP_FULL_ERRNOS and op == "write" for (_d, op, errno) in errs), errs
    (seen,) = {errno for (_d, _op, errno) in errs}
    down = [c for c in board.calls if c[:3] == ("block", key, False)]
    assert len(down) == 1 and f"errno {seen}" in down[0][3] and down[0][4] == "hwagent-probes"
    # metrics carry the verdict and the error counter
    fams = {f.name: f for f in __import__("agent.pressure.metrics", fromlist=["x"]).PressureCollector(eng).collect()}
    health = {tuple(s.labels.values()): s.value for s in fams["hwagent_pressure_device_healthy"].samples}
    assert health[("block", key)] == 0.0
    err_samples = [s for s in fams["hwagent_pressure_block_request_errors"].samples if s.labels["errno"] == str(seen)]
    assert err_samples and err_samples[0].labels["device"] == Path(dev).name
    # quiet period -> healthy again
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(c[:3] == ("block", key, True) for c in board.calls):
        time.sleep(0.3)
        eng.tick()
    assert any(c[:3] == ("block", key, True) for c in board.calls)


def test_errors_below_threshold_keep_device_healthy(probe_set, failing_loop):
    dev, key = failing_loop
    board = FakeBoard()
    eng = PressureEngine(PressureConfig(error_threshold=10_000, error_window_s=30), device_health=board,
                         probes=probe_set)
    eng.load()
    eng.tick()
    write_past_capacity(dev)
    eng.tick()
    assert any(k[0] == key for k in eng.last_block.errors)
    assert not [c for c in board.calls if c[1] == key]
