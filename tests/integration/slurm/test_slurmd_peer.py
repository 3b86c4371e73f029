"""`hwagent slurm conf` against the real slurmd (Debian's slurm-wlm 22.05) and hwloc.

- On this machine, the NodeName line is field for field what ``slurmd -C`` prints.
- On every hwloc snapshot, slurmd reads the same tree (``HWLOC_FSROOT``, the hwloc
  library slurmd is linked with) and its CPUs, total sockets, CoresPerSocket and
  ThreadsPerCore must be hwagent's, except where ``EXPECTED_DIFFERENCES`` says why
  (with a check that the reason is what happens). Boards are not compared: hwagent
  writes Boards=1 (docs/slurm.md), slurmctld does not validate them.
- Slurm's abstract core numbering (gres.conf ``Cores=``) is hwloc's logical core
  order, "Core L#" (gres.conf(5)): a fresh lstopo of the same tree must list the cores
  in hwagent's order.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.cpuset import CPUSet
from agent.slurm.cores import SlurmCores
from agent.slurm.nodeconf import NodeShape, node_shape
from agent.topology.model import Topology
from agent.topology.sysfs import read_topology
from tests.conftest import HWLOC_DIR, hwloc_snapshot_names
from tests.integration.topology.hwloc_view import parse_test, parse_xml

SLURMD = shutil.which("slurmd")
LSTOPO = shutil.which("lstopo-no-graphics")
needs_slurmd = pytest.mark.skipif(SLURMD is None, reason="no slurmd: scripts/setup.sh test installs slurm-wlm")
SNAPSHOTS = hwloc_snapshot_names()
#: the object types slurmd's hwloc load keeps none of
SLURMD_FILTERS = [a for t in ("l1cache", "l2cache", "l4cache", "l5cache", "misc") for a in ("--filter", f"{t}:none")]


def _fields(line: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def _hwloc_env(name: str, root: Path) -> dict[str, str]:
    """How hwloc (in slurmd or lstopo) reads the snapshot: its sysfs root, this host's CPUID
    left out (the x86 backend would mix this machine's caches in), and the .test's variables."""
    env = {**os.environ, "HWLOC_FSROOT": str(root), "HWLOC_COMPONENTS": "-x86"}
    for pair in parse_test(HWLOC_DIR / f"{name}.test").env:
        k, _, v = pair.partition("=")
        env[k] = v
    return env


def _slurmd_c(env: dict[str, str] | None = None) -> dict[str, str]:
    r = subprocess.run([SLURMD or "slurmd", "-C"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("NodeName="))
    return _fields(line)


@needs_slurmd
def test_node_line_equals_slurmd_C_on_this_machine(tmp_path):
    # an empty config: no daemon's rules or reservations, the bare hardware line
    cfg = tmp_path / "empty.toml"
    cfg.write_text("")
    r = subprocess.run([sys.executable, "-m", "agent", "slurm", "conf", "--only", "node", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    ours = _fields(r.stdout.strip())
    theirs = _slurmd_c()
    theirs.pop("UpTime", None)
    assert ours == theirs


# -- the explained differences on snapshots ------------------------------------------
def _boards_truncate(topo: Topology, ours: NodeShape, theirs: dict[str, str]) -> None:
    # hwloc groups the 16 CPU nodes + 1 memory node into 17 boards; slurmd -C prints
    # SocketsPerBoard = 64 // 17 = 3, so its line says 51 sockets for 64. hwagent: 1 x 64.
    assert (theirs["Boards"], theirs["SocketsPerBoard"]) == ("17", "3")
    assert len(topo.package_ids) == 64 and ours.sockets_per_board == 64
    assert int(theirs["CPUs"]) == ours.cpus == 128


def _uneven(topo: Topology, ours: NodeShape, theirs: dict[str, str]) -> None:
    # cores do not divide over the sockets: slurmd prints the CPUs it counts beside the
    # truncated CoresPerSocket, a line slurm.conf resets (CPUs must be a product); hwagent
    # writes the product and says what is lost
    sockets = int(theirs["Boards"]) * int(theirs["SocketsPerBoard"])
    assert len(topo.cores) % sockets != 0
    assert int(theirs["CPUs"]) == len(topo.cpus) > ours.cpus
    assert ours.cpus == sockets * int(theirs["CoresPerSocket"]) * int(theirs["ThreadsPerCore"])
    assert any("do not divide" in n for n in ours.notes)


def _no_cores(topo: Topology, ours: NodeShape, theirs: dict[str, str]) -> None:
    # a hand-made tree with no core_id: hwloc makes no Core objects and slurmd fudges one
    # core holding 4 threads; hwagent makes each CPU its own core (tests/integration/topology)
    assert (theirs["CoresPerSocket"], theirs["ThreadsPerCore"]) == ("1", "4")
    assert (ours.cores_per_socket, ours.threads_per_core) == (4, 1)


Check = Callable[[Topology, NodeShape, dict[str, str]], None]
EXPECTED_DIFFERENCES: dict[str, Check] = {
    "128ia64-17n4s2c": _boards_truncate,
    "16amd64-8n2c-cpusets": _uneven,
    "20s390-2g6s4c": _uneven,
    "offline-cpu0-node0": _uneven,
    "4fake-4gr1nu1pu": _no_cores,
}


def _read(hwloc_extract, name: str) -> tuple[Path, Topology]:
    root = hwloc_extract(name)
    return root, read_topology(str(root / "sys"), str(root / "proc"), log_warnings=False)


@needs_slurmd
@pytest.mark.parametrize("name", SNAPSHOTS)
def test_snapshot_counts_are_slurmds(hwloc_extract, name):
    root, topo = _read(hwloc_extract, name)
    ours = node_shape(topo)
    theirs = _slurmd_c(_hwloc_env(name, root))
    assert ours.cpus == ours.boards * ours.sockets_per_board * ours.cores_per_socket * ours.threads_per_core
    same = (ours.cpus == int(theirs["CPUs"])
            and ours.sockets_per_board == int(theirs["Boards"]) * int(theirs["SocketsPerBoard"])
            and ours.cores_per_socket == int(theirs["CoresPerSocket"])
            and ours.threads_per_core == int(theirs["ThreadsPerCore"]))
    if name in EXPECTED_DIFFERENCES:
        assert not same, f"{name} is listed as different but now agrees with slurmd: drop it from the list"
        EXPECTED_DIFFERENCES[name](topo, ours, theirs)
    else:
        assert same, f"{name}: hwagent {ours} vs slurmd -C {theirs}"
        assert ours.notes == ()


@pytest.mark.skipif(LSTOPO is None, reason="no lstopo-no-graphics: scripts/setup.sh test installs hwloc-nox")
@pytest.mark.parametrize("name", SNAPSHOTS)
def test_abstract_core_order_is_hwlocs_logical_order(hwloc_extract, name):
    root, topo = _read(hwloc_extract, name)
    r = subprocess.run([LSTOPO or "lstopo-no-graphics", "--disallowed", "--no-io", *SLURMD_FILTERS, "--of", "xml"], capture_output=True, text=True,
                       env=_hwloc_env(name, root), timeout=60)
    assert r.returncode == 0, r.stderr
    # loaded as slurmd loads it (xcpuinfo_hwloc_topo_load): HWLOC_TOPOLOGY_FLAG_WHOLE_SYSTEM (CPUs
    # outside the reading process's cpuset included), L1/L2/L4/L5 caches and Misc filtered out and
    # no I/O objects (hwloc's default; lstopo's PCI locality makes Groups that would reorder
    # packages), which changes the tree and so the order; document order is Core L#
    hwloc_cores = parse_xml(r.stdout).cores
    if not hwloc_cores:
        assert name == "4fake-4gr1nu1pu"  # no core_id: no Core objects (see _no_cores)
        return
    ours = [k.cpus for k in SlurmCores(topo).ordered]
    if name in ORDER_DIFFERENCES:
        assert ours != hwloc_cores, f"{name} is listed as ordered differently but now agrees: drop it"
        assert sorted(ours, key=CPUSet.first) == sorted(hwloc_cores, key=CPUSet.first)  # the same cores
        ORDER_DIFFERENCES[name](topo, root)
    else:
        assert ours == hwloc_cores


def _s390_books(topo: Topology, root: Path) -> None:
    # s390 packages sit in books and drawers (book_siblings, drawer_siblings); hwloc nests the
    # packages in those Groups, hwagent's model has no such level, so packages 10-12 (book 0)
    # come after 3-9 here but before them in hwloc
    assert (root / "sys/devices/system/cpu/cpu0/topology/book_siblings").exists()
    assert topo.groups == () or all(g.kind != "book" for g in topo.groups)


def _overlapping_numa(topo: Topology, root: Path) -> None:
    # a fake: node 2 has no CPUs and nodes 3-5 overlap on purpose (hwloc read it with
    # HWLOC_DEBUG_ALLOW_OVERLAPPING_NODE_CPUSETS=1). hwloc hangs the CPU-less node 2 on a
    # Group it makes of nodes 0 and 1 (CPUs 0-3, 8-11), so their cores come before 4-7;
    # hwagent gives each CPU one node and makes no such Group (docs/slurm.md)
    node = root / "sys/devices/system/node"
    maps = {n: CPUSet.from_mask((node / f"node{n}" / "cpumap").read_text().strip()) for n in range(6)}
    assert not maps[2] and maps[4] & maps[5] and maps[3] & maps[5]
    assert topo.numa_node(2).memory_only


ORDER_DIFFERENCES: dict[str, Callable[[Topology, Path], None]] = {
    "20s390-2g6s4c": _s390_books,
    "fakeheterocpunuma": _overlapping_numa,
}
