"""The reader on this machine's own /sys, side by side with the installed hwloc.

This VM has one NUMA node and two CPUs, so multi-node behaviour is proven on the
snapshots (test_hwloc_snapshots.py); here the point is that the live paths
(default roots, /proc/self/status, a real cpuset cgroup) agree with lstopo.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from agent.cpuset import CPUSet
from agent.topology.sysfs import read_topology
from tests.integration.topology.compare import compare
from tests.integration.topology.hwloc_view import parse_xml

LSTOPO = shutil.which("lstopo-no-graphics")
CPUSET_V1 = Path("/sys/fs/cgroup/cpuset")
needs_lstopo = pytest.mark.skipif(LSTOPO is None, reason="lstopo-no-graphics not installed (apt package hwloc)")


@needs_lstopo
def test_live_machine_matches_lstopo() -> None:
    topo = read_topology()
    xml = subprocess.run([str(LSTOPO), "--of", "xml"], capture_output=True, text=True, check=True, timeout=60)
    assert compare(topo, parse_xml(xml.stdout)) == {}


def test_live_roots_read_own_allowed_sets_fixture_roots_do_not(tmp_path: Path) -> None:
    live = read_topology()
    status = Path("/proc/self/status").read_text()
    allowed = next(line.split(":", 1)[1] for line in status.splitlines() if line.startswith("Cpus_allowed_list"))
    assert live.allowed_cpus == CPUSet.parse(allowed)
    assert live.allowed_mems is not None and live.allowed_mems
    assert read_topology(self_cgroup=False).allowed_cpus is None
    # Same tree reached through another path is not "live": no process of its own.
    link = tmp_path / "sys"
    link.symlink_to("/sys")
    assert read_topology(str(link), "/proc").allowed_cpus is None


_CHILD = """
import json, subprocess, sys
from agent.topology.sysfs import read_topology
t = read_topology()
xml = subprocess.run([sys.argv[1], "--of", "xml"], capture_output=True, text=True, check=True).stdout
print(json.dumps({"cpus": str(t.allowed_cpus), "mems": str(t.allowed_mems), "xml": xml}))
"""


@pytest.mark.root
@needs_lstopo
@pytest.mark.skipif(not (CPUSET_V1 / "cpuset.cpus").exists(), reason="no cgroup v1 cpuset hierarchy here")
def test_cpuset_cgroup_restriction_seen_like_hwloc() -> None:
    """A process in a one-CPU cpuset reads that CPU as allowed, and hwloc agrees."""
    online = read_topology().online
    if len(online) < 2:
        pytest.skip("needs two online cpus")
    target = CPUSet([online.sorted()[-1]])
    cg = CPUSET_V1 / f"hwagent-test-topology-{uuid.uuid4().hex[:8]}"
    cg.mkdir()
    try:
        (cg / "cpuset.cpus").write_text(str(target))
        (cg / "cpuset.mems").write_text((CPUSET_V1 / "cpuset.mems").read_text().strip())
        out = subprocess.run(
            ["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$0" -c "$1" "$2"', sys.executable, _CHILD, str(LSTOPO)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=Path(__file__).resolve().parents[3],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
        )
        assert out.returncode == 0, out.stderr
        seen = json.loads(out.stdout)
        assert CPUSet.parse(seen["cpus"]) == target
        hw = parse_xml(seen["xml"])
        assert hw.pus == target
        restricted = read_topology()  # this process is not in the cpuset...
        assert restricted.allowed_cpus != target
        # ...but the child's reading, restricted to its cpuset, matches hwloc's
        child_view = dataclasses.replace(restricted, allowed_cpus=target)
        assert compare(child_view, hw) == {}
    finally:
        # the child has exited; an empty cgroup can be removed
        cg.rmdir()
