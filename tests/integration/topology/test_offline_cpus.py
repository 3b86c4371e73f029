"""Which CPUs are online when the kernel gives no ``cpu/online`` list: hwloc is the peer.

Without ``cpu/online`` each CPU's own ``cpuN/online`` decides, and a CPU
without that file (one that cannot be unplugged) is online. hwloc reads the
tree the same way, so on every shape below ``lstopo-no-graphics -i`` and
hwagent must name the same online CPUs, and both the CPUs the shape states.
None of hwloc's stored snapshots has this shape (those without ``cpu/online``
either have every per-CPU file, none at all, or no CPU offline), hence the
hand-made trees.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agent.cpuset import CPUSet
from agent.topology.sysfs import read_topology
from tests.integration.topology.compare import compare
from tests.integration.topology.hwloc_view import parse_xml
from tests.unit.topology.fake_sysfs import FakeMachine

LSTOPO = shutil.which("lstopo-no-graphics")

#: cpuN -> what its online file says; CPUs not named have no file
SHAPES = {
    "only-the-offline-cpu-has-a-file": {5: False},
    "cpu1-without-a-file": {2: True, 5: False, 6: False},
    "every-cpu-but-cpu0": {1: True, 2: True, 3: False, 4: True, 5: True, 6: True, 7: True},
    "no-files": {},
}


@pytest.mark.skipif(LSTOPO is None, reason="lstopo-no-graphics not installed (apt package hwloc)")
@pytest.mark.parametrize("flags", SHAPES.values(), ids=SHAPES.keys())
def test_hwagent_and_lstopo_agree_on_the_online_cpus(tmp_path: Path, flags: dict[int, bool]) -> None:
    m = FakeMachine(tmp_path).build()
    for c in range(m.ncpus):  # hwloc takes packages from the masks, which FakeMachine leaves out
        mask = m.package_cpus(m.package(c)).to_mask()
        m.write(f"sys/devices/system/cpu/cpu{c}/topology/package_cpus", f"{mask}\n")
        m.write(f"sys/devices/system/cpu/cpu{c}/topology/core_siblings", f"{mask}\n")
    m.per_cpu_online(flags)
    out = subprocess.run(
        [str(LSTOPO), "--if", "fsroot", "-i", str(m.root), "--of", "xml"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    hw = parse_xml(out.stdout)
    t = read_topology(m.sys, m.proc)
    expected = CPUSet(range(m.ncpus)) - CPUSet(c for c, up in flags.items() if not up)
    assert hw.pus == expected, "hwloc reads this shape differently from what the test states"
    assert t.online == hw.pus
    assert compare(t, hw) == {}
