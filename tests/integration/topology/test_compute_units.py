"""AMD compute units: thread siblings with different core ids are two cores, not SMT.

The fixture reproduces what the kernel reports on family 15h parts (see
``amd_compute_unit_machine``). hwloc's reading of the same tree is the peer:
it must agree on cores per package, and the CPU policy, which takes its cores
from the model, must pack them as single-thread cores.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agent.cpu.calculator import TopoIndex, take_by_numa_balance, take_by_topology
from agent.cpuset import CPUSet
from agent.topology.sysfs import read_topology
from tests.integration.topology.compare import compare
from tests.integration.topology.hwloc_view import parse_xml
from tests.unit.topology.fake_sysfs import amd_compute_unit_machine

LSTOPO = shutil.which("lstopo-no-graphics")


@pytest.fixture
def machine(tmp_path: Path):
    return amd_compute_unit_machine(tmp_path)


def test_each_integer_core_is_a_core_and_the_unit_is_a_group(machine) -> None:
    t = read_topology(machine.sys, machine.proc)
    # every CPU is each other's thread sibling with its unit mate...
    assert t.cpu(0).thread_siblings == CPUSet([0, 1]) and t.cpu(0).core_id != t.cpu(1).core_id
    # ...yet each is its own core: 8 cores, one thread each
    assert len(t.cores) == 8 and t.threads_per_core == 1
    assert [len(t.cores_of_package(p)) for p in t.package_ids] == [4, 4]
    units = t.groups_of_kind("compute_unit")
    assert [g.cpus for g in units] == [CPUSet([0, 1]), CPUSet([2, 3]), CPUSet([4, 5]), CPUSet([6, 7])]
    assert t.warnings == ()


@pytest.mark.skipif(LSTOPO is None, reason="lstopo-no-graphics not installed (apt package hwloc)")
def test_hwloc_counts_the_same_cores_per_package(machine) -> None:
    out = subprocess.run(
        [str(LSTOPO), "--if", "fsroot", "-i", str(machine.root), "--of", "xml"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    hw = parse_xml(out.stdout)
    t = read_topology(machine.sys, machine.proc)
    assert len(hw.cores) == 8, "hwloc should split the units into cores (AuthenticAMD family 21)"
    assert compare(t, hw) == {}


def test_cpu_policy_packs_unit_mates_as_separate_cores(machine) -> None:
    idx = TopoIndex(read_topology(machine.sys, machine.proc))
    assert idx.cpus_per_core == 1
    assert all(len(k.cpus) == 1 for k in idx.cores)
    # NUMA balancing takes one core per node per round: with units mistaken
    # for 2-thread cores it would hand out {0,1} (one "core" on node 0)
    taken, left = take_by_numa_balance(idx, idx.all_cpuset, 2)
    assert taken == CPUSet([0, 4]) and left == idx.all_cpuset - taken
    # topology packing still fills one L3 (package) before the next
    assert take_by_topology(idx, idx.all_cpuset, 3) == CPUSet([0, 1, 2])
