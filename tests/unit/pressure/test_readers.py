"""File readers and fallbacks on fixture trees (what a host without BPF would use)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cgroups.hierarchy import detect_hierarchy, relative_cgroup_path
from agent.cgroups.mounts import cgroup_mounts
from agent.contracts.hist import Histogram
from agent.pressure.procfs import read_diskstats, read_net_errors, read_psi
from agent.pressure.readers import SchedstatRunqueue, dev_key, rollup


def write(p: Path, text: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_psi_parse(tmp_path):
    write(tmp_path / "cpu", "some avg10=12.50 avg60=2.00 avg300=0.68 total=4270265\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    p = read_psi(tmp_path / "cpu")
    assert p.some_avg10 == 0.125 and p.some_total_us == 4270265 and p.full_total_us == 0
    assert read_psi(tmp_path / "missing") is None


def test_diskstats_and_net_sysfs(tmp_path):
    write(tmp_path / "proc/diskstats", "   7       0 loop0 10 0 80 5 3 0 24 7 0 12 12 0 0 0 0\n bad line\n")
    d = read_diskstats(str(tmp_path / "proc"))["7:0"]
    assert (d.name, d.reads, d.read_ms, d.writes, d.write_ms) == ("loop0", 10, 5, 3, 7)
    write(tmp_path / "sys/class/net/eth0/statistics/tx_errors", "4\n")
    write(tmp_path / "sys/class/net/eth0/queues/tx-0/tx_timeout", "2\n")
    write(tmp_path / "sys/class/net/eth0/queues/tx-1/tx_timeout", "1\n")
    n = read_net_errors(str(tmp_path / "sys"))["eth0"]
    assert (n.tx_errors, n.tx_timeouts) == (4, 3)


def test_schedstat_fallback_keeps_exited_threads_contribution(tmp_path):
    mount = tmp_path / "cg"
    proc = tmp_path / "proc"
    write(mount / "pod/ctr/tasks", "11\n12\n")
    write(proc / "11/schedstat", "100 1000 5\n")
    write(proc / "12/schedstat", "100 2000 5\n")
    r = SchedstatRunqueue(mount, str(proc))
    assert r.read(["/pod/ctr"])["/pod/ctr"].sum_ns == 0  # first look is the baseline
    write(proc / "11/schedstat", "100 1500 5\n")
    write(proc / "12/schedstat", "100 2600 5\n")
    assert r.read(["/pod/ctr"])["/pod/ctr"].sum_ns == 1100
    (proc / "12/schedstat").unlink()  # thread 12 exited
    write(mount / "pod/ctr/tasks", "11\n")
    write(proc / "11/schedstat", "100 1600 5\n")
    assert r.read(["/pod/ctr"])["/pod/ctr"].sum_ns == 1200  # still cumulative


def test_schedstat_fallback_gives_a_histogram_of_waits_per_timeslice(tmp_path):
    """run_delay and pcount per thread: each interval a thread's timeslices land in the log2
    slot of its mean wait per timeslice, so the fallback has a count and a p99 (of per-thread
    means over the interval: coarser than the BPF probe's per-wake-up slots), not only a sum."""
    mount = tmp_path / "cg"
    proc = tmp_path / "proc"
    write(mount / "pod/ctr/tasks", "11\n12\n")
    write(proc / "11/schedstat", "100 1000 5\n")
    write(proc / "12/schedstat", "100 2000 5\n")
    r = SchedstatRunqueue(mount, str(proc))
    assert r.read(["/pod/ctr"])["/pod/ctr"].count == 0  # the baseline
    # thread 11: 99 timeslices waiting 10 µs each; thread 12: 1 timeslice waiting 3 ms
    write(proc / "11/schedstat", f"100 {1000 + 99 * 10_000} 104\n")
    write(proc / "12/schedstat", f"100 {2000 + 3_000_000} 6\n")
    h = r.read(["/pod/ctr"])["/pod/ctr"]
    assert h.count == 100 and h.sum_ns == 99 * 10_000 + 3_000_000
    assert h.quantile_us(0.5) == 16.0  # 10 µs: the [8, 16) µs slot
    assert h.quantile_us(1.0) == 4096.0  # 3 ms: the [2048, 4096) µs slot
    # a thread that ran no timeslice adds no count (its wait, if any, still adds to the sum)
    write(proc / "12/schedstat", f"100 {2000 + 3_000_000 + 500} 6\n")
    h2 = r.read(["/pod/ctr"])["/pod/ctr"]
    assert h2.count == 100 and h2.sum_ns == h.sum_ns + 500


def test_rollup_and_paths():
    rows = {"/kp/pod1/a": Histogram((0, 1), 10), "/kp/pod1/b": Histogram((0, 2), 20), "/kp/pod10/a": Histogram((0, 4), 40)}
    assert rollup(rows, "/kp/pod1").sum_ns == 30  # pod10 is not under pod1
    assert rollup(rows, "/").sum_ns == 70
    mounts = {"cpu": Path("/sys/fs/cgroup/cpu"), "v2": Path("/sys/fs/cgroup/unified")}
    assert relative_cgroup_path("/sys/fs/cgroup/cpu/kp/pod1/", mounts) == "/kp/pod1"
    assert relative_cgroup_path("kp/pod1", mounts) == "/kp/pod1"
    assert relative_cgroup_path("/sys/fs/cgroup/cpu", mounts) == "/"
    assert dev_key((7 << 20) | 3) == "7:3" and dev_key((259 << 20) | 1) == "259:1"


def test_hierarchy_detection_from_mounts(tmp_path):
    hybrid = ("cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n"
              "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n"
              "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n")
    write(tmp_path / "h/self/mounts", hybrid)
    assert detect_hierarchy("auto", str(tmp_path / "h")).name == "cpu"
    assert detect_hierarchy("v2", str(tmp_path / "h")).mount == Path("/sys/fs/cgroup/unified")
    write(tmp_path / "v2/self/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n")
    assert detect_hierarchy("auto", str(tmp_path / "v2")).name == "v2"
    with pytest.raises(ValueError, match="not mounted"):
        detect_hierarchy("cpu", str(tmp_path / "v2"))
    write(tmp_path / "combined/self/mounts", "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n")
    assert cgroup_mounts(str(tmp_path / "combined"))["cpu"] == Path("/sys/fs/cgroup/cpu,cpuacct")
