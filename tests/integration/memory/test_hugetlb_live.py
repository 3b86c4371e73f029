"""The runtime's memory and hugetlb limits on this machine's kernel: 2 MiB pages reserved
by the test (``vm.nr_hugepages``, restored after), a container cgroup made by
``WorkloadCgroups`` with a hugetlb limit of two pages and a memory limit, and a
workload that maps hugepages with MAP_HUGETLB: within the limit it runs, beyond it
the kernel stops it (SIGBUS on the first page over the limit)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cgroups.detect import detect
from agent.cgroups.limits import CgroupLimits, hugetlb_name
from agent.cgroups.workload import WorkloadCgroups
from agent.cpuset import CPUSet
from tests.cgroup_support import kill_and_remove_subtree, spawn_in

pytestmark = [pytest.mark.root]

MB = 1 << 20
NR = Path("/proc/sys/vm/nr_hugepages")
#: maps N MiB of 2 MiB hugepages and touches them page by page, saying so after each
MAPPER = r"""
import mmap, sys
MAP_HUGETLB = 0x40000
n = int(sys.argv[1]) << 20
m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_HUGETLB)
for i in range(0, n, 2 << 20):
    m[i] = 1
    print("touched", i // (2 << 20) + 1, flush=True)
print("done", flush=True)
"""


@pytest.fixture
def pages():
    if not NR.exists() or not Path("/sys/kernel/mm/hugepages/hugepages-2048kB").is_dir():
        pytest.skip("no 2 MiB hugepages on this kernel")
    old = int(NR.read_text())
    try:
        NR.write_text(str(old + 8))
        got = int(NR.read_text()) - old
        if got < 6:
            pytest.skip(f"the kernel gave {got} of 8 2 MiB pages (memory too fragmented)")
        yield got
    finally:
        NR.write_text(str(old))
        assert int(NR.read_text()) == old


@pytest.fixture
def cgroups():
    layout = detect("/sys/fs/cgroup")
    subtree = f"/hwagent-test-mem-{os.getpid()}-{secrets.token_hex(3)}"
    wc = WorkloadCgroups(layout, subtree)
    if "hugetlb" not in wc.available():
        pytest.skip(f"no hugetlb controller here ({layout.mode})")
    control = layout.controller_root("hugetlb") / "cgroup.subtree_control"
    before = control.read_text().split() if layout.is_v2("hugetlb") else None
    try:
        yield wc
    finally:
        kill_and_remove_subtree(subtree)
        if before is not None and "hugetlb" not in before:
            control.write_text("-hugetlb")  # the machine as the test found it


def run_mapper(wc: WorkloadCgroups, rel: str, mib: int) -> tuple[int, list[str]]:
    dirs = [os.path.dirname(f) for f in wc.procs_files(rel)]
    p = spawn_in(dirs, [sys.executable, "-c", MAPPER, str(mib)], stdout=subprocess.PIPE, text=True)
    out, _ = p.communicate(timeout=120)
    return p.returncode, out.split("\n")


def test_the_hugetlb_limit_stops_a_workload_at_its_pages(pages, cgroups: WorkloadCgroups) -> None:
    size = hugetlb_name(2 * MB)
    assert size == "2MB"
    limits = CgroupLimits(cpus=CPUSet.parse(Path("/sys/devices/system/cpu/online").read_text().strip()),
                          mems=CPUSet({0}), memory_limit=256 * MB, hugetlb=((size, 4 * MB),),
                          needs=frozenset({"cpuset", "cpu", "memory", "hugetlb"}))
    rel = cgroups.path("pod", "c")
    cgroups.create(rel, limits)
    # the files the kernel enforces hold what the runtime wrote
    layout = cgroups.layout
    mem_file = layout.controller_root("memory") / rel.lstrip("/") / (
        "memory.max" if layout.is_v2("memory") else "memory.limit_in_bytes")
    assert int(mem_file.read_text()) == 256 * MB
    hug = layout.controller_root("hugetlb") / rel.lstrip("/") / (
        f"hugetlb.{size}.max" if layout.is_v2("hugetlb") else f"hugetlb.{size}.limit_in_bytes")
    assert int(hug.read_text()) == 4 * MB

    rc, lines = run_mapper(cgroups, rel, 4)  # two pages: within the limit
    assert rc == 0 and "done" in lines, lines
    rc, lines = run_mapper(cgroups, rel, 8)  # four pages: the third one is over the limit
    assert rc == -signal.SIGBUS, (rc, lines)
    assert "touched 2" in lines and "touched 3" not in lines
