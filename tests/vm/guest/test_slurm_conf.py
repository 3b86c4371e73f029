"""`hwagent slurm conf` in the VM tier's multi-NUMA guests, checked by the real slurmd and slurmctld (issue 35 part 1).

The host has one NUMA node: what ``Cores=`` says of a device on another node, and whether Slurm
then binds a job to those cores, can only be seen on a machine with several. The numa2 guest
(2 sockets x 2 cores x 2 threads, a node per socket, cgroup v2) and the numa4 guest (four
sub-NUMA nodes, cgroup v1) each carry a virtio-blk disk behind a PCIe expander bridge on each of
``topo.pci_numa_nodes`` (serial ``vmtest-n<node>``, tests/vm/topologies.py). In each:

1. the NodeName line equals ``slurmd -C``'s fields (slurmd's hwloc reads the guest's own sysfs);
2. hwagent's gres.conf gives each disk the Slurm cores of its NUMA node (``Cores=``), and a real
   slurmctld + slurmd (Debian's slurm-wlm 22.05, tests/integration/slurm/cluster.py; on numa2
   with the v2 cgroup plugin, ``V2Cgroups``, on numa4 with the v1 plugin in a test-owned subtree) registers the node with that configuration as generated, not
   drained, slurmctld finding nothing wrong with the GRES records;
3. two jobs ``srun --gres=disk:1 --gres-flags=enforce-binding``, the first holding its disk while
   the second starts, each run on the CPUs of its own disk's NUMA node (the task's
   ``Cpus_allowed_list``: task/cgroup's cpuset and task/affinity), so together on both devices'
   nodes, the far one included, where the same job without the GRES lands on node 0's first
   core (Slurm's first fit). Where a NUMA node is smaller than a socket (numa4) Slurm 22.05 binds
   at the socket and the step never starts (``SUB_SOCKET``): skipped there, saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cpuset import CPUSet
from tests.integration.slurm.cgroups import SlurmCgroups
from tests.integration.slurm.cluster import SlurmCluster, SlurmNode, missing_binaries, owned_cgroups
from tests.vm.guest.v2_support import CGROUP2, budget, keep_artifacts, wait_until
from tests.vm.topologies import GuestTopology

#: TCG runs slurmctld, slurmd and hwagent ~10x slower than the host: the waits inside are scaled
pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

_SKIP = ("no slurmd: scripts/setup.sh test installs slurm-wlm and munge" if missing_binaries() else None)
if _SKIP:
    pytestmark.append(pytest.mark.skip(reason=_SKIP))

RULES = ('[devices]\ndefault_rules = false\n[[devices.resources]]\nname = "example.com/disk"\n'
         'block_name = ["vd*"]\n')


@pytest.fixture(scope="module")
def far(topo: GuestTopology) -> int:
    """The device NUMA node furthest from node 0 this guest has (a disk behind a bridge there)."""
    if len(topo.nodes) < 2 or not topo.pci_numa_nodes or max(topo.pci_numa_nodes) == 0:
        pytest.skip(f"{topo.name}: no device on a NUMA node besides 0")
    return max(topo.pci_numa_nodes)


def _fields(line: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def _conf(tmp: Path, *args: str) -> list[str]:
    cfg = tmp / "rules.toml"
    cfg.write_text(RULES)
    r = subprocess.run([sys.executable, "-m", "agent", "slurm", "conf", "--config", str(cfg), *args],
                       capture_output=True, text=True, timeout=budget(120))
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def _disk_of(node: int) -> str:
    """/dev/vdX of the disk whose serial names ``node``."""
    for d in sorted(Path("/sys/block").glob("vd*")):
        serial = d / "serial"
        if serial.exists() and serial.read_text().strip() == f"vmtest-n{node}":
            return f"/dev/{d.name}"
    raise AssertionError(f"no virtio disk with serial vmtest-n{node}")


def _slurm_cores(topo: GuestTopology, node: int) -> CPUSet:
    """Slurm's abstract core numbers of ``node``'s cores: qemu numbers threads innermost and
    packages outermost, so core k (0-based over the machine) holds CPUs k*threads .. +threads-1."""
    return CPUSet(sorted({c // topo.threads for c in topo.node_cpus_present(node)}))


def _uneven(topo: GuestTopology) -> bool:
    """Whether the present CPUs leave the packages with different numbers of cores (memonly: 6 of 8)."""
    per_package: dict[int, set[int]] = {}
    for cpu in topo.present_cpus():
        per_package.setdefault(topo.package_of(cpu), set()).add(topo.core_of(cpu))
    return len({len(cores) for cores in per_package.values()}) > 1


def test_node_line_equals_slurmd_C(topo: GuestTopology, tmp_path: Path) -> None:
    """Field for field, except on a shape whose cores do not divide over its sockets: there slurmd
    prints every CPU beside a truncated CoresPerSocket (a line slurmctld would reset) and hwagent
    writes the product and says why (docs/slurm.md; the host's snapshot test has the same case)."""
    (tmp_path / "empty.toml").write_text("")
    r = subprocess.run([sys.executable, "-m", "agent", "slurm", "conf", "--only", "node", "--config",
                        str(tmp_path / "empty.toml")], capture_output=True, text=True, timeout=budget(120))
    assert r.returncode == 0, r.stderr
    c = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=budget(60))
    assert c.returncode == 0, c.stderr
    theirs = _fields(next(x for x in c.stdout.splitlines() if x.startswith("NodeName=")))
    theirs.pop("UpTime", None)
    ours = _fields(r.stdout.strip())
    if not _uneven(topo):
        assert ours == theirs
        return
    assert int(theirs["CPUs"]) == topo.ncpus > int(ours["CPUs"]), (ours, theirs)
    sockets = int(theirs["Boards"]) * int(theirs["SocketsPerBoard"])
    assert int(ours["CPUs"]) == sockets * int(theirs["CoresPerSocket"]) * int(theirs["ThreadsPerCore"])
    assert {k: v for k, v in ours.items() if k != "CPUs"} == {k: v for k, v in theirs.items() if k != "CPUs"}
    assert "do not divide" in r.stderr, r.stderr


class V2Cgroups(SlurmCgroups):
    """22.05's cgroup/v2 plugin on the guest's unified hierarchy, without systemd (as
    tests/vm/guest/test_slurm.py runs it: ``IgnoreSystemd=yes``, ``CgroupAutomount=yes``; slurmd,
    not started by systemd, moves itself into ``<scope>/slurmd``), with the slice and the steps'
    scope made first, as systemd makes them on a real node:

    - the plugin makes its scope below ``system.slice`` but not the slice: slurmd exits "Could not
      create scope directory";
    - it reads a cgroup's ``cgroup.controllers`` split on spaces only, so the last name keeps its
      newline and is not found: where it enables only cpuset, cpu and memory itself, memory is
      last and every slurmstepd fails "Controller memory is not enabled!" (task/cgroup's init).
      systemd's slice and a ``Delegate=yes`` scope have ``pids`` (and ``io``) enabled too, after
      memory; so do these.

    The tree is not relocatable as v1's is, so ``tag`` is "" (hwagent's ``cgroup_parent``: the
    root); ``remove`` takes the scope and the slice away once slurmd is gone (in the guest nothing
    else uses ``system.slice``)."""

    def __init__(self, node: str, links: Path) -> None:
        super().__init__("", links, CGROUP2)
        self.scope = CGROUP2 / "system.slice" / f"{node}_slurmstepd.scope"

    def create(self) -> None:
        self.links.mkdir(parents=True, exist_ok=True)
        for d in (self.scope.parent, self.scope):
            d.mkdir(exist_ok=True)
            (d / "cgroup.subtree_control").write_text("+cpuset +cpu +io +memory +pids")

    def cgroup_conf(self) -> str:
        return "\n".join(["CgroupPlugin=cgroup/v2", f"CgroupMountpoint={CGROUP2}", "CgroupAutomount=yes",
                          "IgnoreSystemd=yes", "ConstrainCores=yes", "ConstrainRAMSpace=yes"]) + "\n"

    def dirs(self) -> list[Path]:
        if not self.scope.is_dir():
            return []
        return [Path(root) for root, _d, _f in os.walk(self.scope, topdown=False)]

    def remove(self, timeout: float = 10.0) -> list[str]:
        left = super().remove(timeout)
        try:
            self.scope.parent.rmdir()
        except OSError:
            pass
        return left


def _cgroups(base: Path, node: str, layout: str) -> SlurmCgroups:
    """v1: the harness's test-owned subtree; v2: ``V2Cgroups``."""
    return V2Cgroups(node, base / "cg") if layout == "v2" else owned_cgroups(base)


#: the guest's one non-loopback interface while the test runs (a dummy link of the test's own)
DUMMY = "hwslconf"
DUMMY_ADDR = "192.0.2.20/24"


def setup_network() -> None:
    """An address besides loopback: Slurm 22.05 resolves its listening address with AI_ADDRCONFIG,
    which answers nothing where ``lo`` is the only interface (the tier boots with ``-nic none``;
    the guest's virtio NICs are other tests' devices), and slurmctld exits "Unable to resolve"."""
    teardown_network()
    for argv in (["modprobe", "dummy"], ["ip", "link", "add", DUMMY, "type", "dummy"],
                 ["ip", "addr", "add", DUMMY_ADDR, "dev", DUMMY], ["ip", "link", "set", DUMMY, "up"]):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=budget(60))
        assert r.returncode == 0, f"{' '.join(argv)}: {r.stderr}"


def teardown_network() -> None:
    subprocess.run(["ip", "link", "del", DUMMY], capture_output=True, timeout=budget(60))


class GuestCluster(SlurmCluster):
    """The one-node cluster with its waits scaled to the guest."""

    def _wait(self, ready, what: str, timeout: float = 20.0) -> None:  # noqa: ANN001 - the base's signature
        super()._wait(ready, what, budget(timeout))


@pytest.fixture
def cluster_with_gres(topo: GuestTopology, cgroup_layout: str, far: int) -> Iterator[tuple[SlurmCluster, list[str]]]:
    """The cluster started with hwagent's node line and gres.conf as generated; also the gres lines."""
    if cgroup_layout not in ("v1", "v2"):
        pytest.skip(f"cgroup {cgroup_layout}: the cluster helpers run Slurm's v1 or v2 plugin")
    base = Path(tempfile.mkdtemp(prefix="slconf-", dir="/tmp"))
    base.chmod(0o755)
    lines = _conf(base, "--gres-name", "example.com/disk=disk")
    node_line = next(x for x in lines if x.startswith("NodeName=") and " CPUs=" in x)
    gres = [x for x in lines if x.startswith("NodeName=") and " Name=disk " in x]
    name, _, fields = node_line.removeprefix("NodeName=").partition(" ")
    assert len(gres) == len(topo.pci_numa_nodes), gres
    setup_network()
    c = GuestCluster(base / "slurm", (SlurmNode(name, fields),), "\n".join(gres) + "\n", ("disk",),
                     cgroups=_cgroups(base, name, cgroup_layout))
    try:
        c.start()
        yield c, gres
    finally:
        subprocess.run(["scancel", "--full", "-u", "root"], env=c.env, capture_output=True, timeout=budget(30))
        c.stop()
        keep_artifacts("slurm-conf", [*(base / "slurm" / "log").glob("*"), base / "slurm" / "etc" / "gres.conf"])
        teardown_network()
        shutil.rmtree(base, ignore_errors=True)


def _srun_allowed(c: SlurmCluster, out: Path, *args: str, then: str = "") -> list[str]:
    """srun of a one-CPU task that writes its ``Cpus_allowed_list`` to ``out`` (a file: in the guest
    srun's own I/O forwarding brought nothing back), then runs ``then``."""
    tmp = out.with_suffix(".tmp")
    script = f"grep Cpus_allowed_list /proc/self/status > {tmp} && mv {tmp} {out}" + (f"; {then}" if then else "")
    return ["srun", "-N1", "-n1", "-c", "1", *args, "sh", "-c", script]


def _read_allowed(out: Path) -> CPUSet:
    return CPUSet.parse(out.read_text().split(":", 1)[1].strip())


def _allowed(c: SlurmCluster, *args: str) -> CPUSet:
    """The CPUs a one-CPU task of ``srun ... args`` may run on, as the task itself reads them."""
    out = c.base / f"allowed-{len(list(c.base.glob('allowed-*')))}"
    r = c.run(_srun_allowed(c, out, *args), timeout=budget(60))
    assert r.returncode == 0 and out.exists(), r.stdout + r.stderr + c.log("slurmd")[-2000:]
    return _read_allowed(out)


def _nodes_are_sockets(topo: GuestTopology, nodes: tuple[int, ...]) -> bool:
    """Whether each of ``nodes`` holds whole packages (numa2: a node per socket; numa4: two per socket)."""
    for node in nodes:
        cpus = set(topo.node_cpus_present(node))
        packages = {topo.package_of(c) for c in cpus}
        if {c for c in topo.present_cpus() if topo.package_of(c) in packages} != cpus:
            return False
    return True


#: what Slurm 22.05 does with enforce-binding where a NUMA node is smaller than a socket (seen in numa4)
SUB_SOCKET = ("Slurm 22.05 binds a GRES job to its device's socket, not its NUMA node: in numa4 (two nodes per "
              "socket, disks on nodes 1 and 3: Cores=1 and Cores=3) a --gres=disk:1 --gres-flags=enforce-binding job "
              "was allocated core 0 (CPU_IDs=0-1: node 0, on the socket of the node 1 disk), and its step then "
              "waits forever, 'step creation temporarily disabled (Requested nodes are busy)'; docs/slurm.md")


def test_generated_node_and_gres_conf_are_accepted(topo: GuestTopology,
                                                   cluster_with_gres: tuple[SlurmCluster, list[str]]) -> None:
    c, gres = cluster_with_gres
    # every disk's Cores= are its own node's, in Slurm's core numbering
    for node in topo.pci_numa_nodes:
        line = next(x for x in gres if f" File={_disk_of(node)} " in f"{x} ")
        assert CPUSet.parse(_fields(line)["Cores"]) == _slurm_cores(topo, node), (node, line)
    # slurmctld takes the node as hwagent described it: registered, not drained
    state = c.wait_registered(timeout=30)
    assert state == "idle none", (state, c.log("slurmctld")[-3000:])
    logs = c.log("slurmctld") + c.log("slurmd")
    assert "differs from hardware" not in logs
    # the GRES records as generated: no "lacks File=", no "CPUs configured for only some of the records"
    assert not [x for x in logs.splitlines() if "error" in x and "gres" in x.lower()], logs[-3000:]


def test_a_bound_gres_job_runs_on_the_cores_local_to_its_device(
        topo: GuestTopology, far: int, cluster_with_gres: tuple[SlurmCluster, list[str]]) -> None:
    if not _nodes_are_sockets(topo, topo.pci_numa_nodes):
        pytest.skip(SUB_SOCKET)
    c, _ = cluster_with_gres
    c.wait_registered(timeout=30)
    # without the GRES: Slurm's first fit, node 0's first core
    near = _allowed(c)
    assert near <= CPUSet(topo.node_cpus_present(0)), near
    # with it and enforce-binding: each job on the cores local to its disk; the first holds its disk
    # (and its core) while the second starts, so the two land on both devices' nodes
    binding = ("--gres=disk:1", "--gres-flags=enforce-binding")
    first = c.base / "bound-first"
    said = c.base / "bound-first.srun"
    with said.open("w") as err:
        holder = subprocess.Popen(_srun_allowed(c, first, "-v", *binding, then="sleep 600"), env=c.env,
                                  stdout=subprocess.DEVNULL, stderr=err)

    def what_slurm_says() -> str:
        jobs = c.run(["scontrol", "show", "job", "-d"], timeout=budget(30)).stdout
        return f"srun: {said.read_text()[-1500:]}\nscontrol show job -d: {jobs[-2500:]}"

    try:
        wait_until("the first bound job to start", first.exists, 10, show=what_slurm_says)
        second = _allowed(c, *binding)
    finally:
        holder.terminate()
    got = [_read_allowed(first), second]
    nodes = {node for cpus in got for node in topo.pci_numa_nodes if cpus <= CPUSet(topo.node_cpus_present(node))}
    assert len(nodes) == 2 and far in nodes and all(got), (got, nodes)
    assert os.cpu_count() == topo.ncpus
