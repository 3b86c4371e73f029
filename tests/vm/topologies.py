"""Guest machine shapes of the VM tier: one spec yields both the qemu command line and what
the guest's kernel must then show, so a guest test compares discovery against the very
topology that was asked for (no second hand-written expectation to drift).

Pure data and pure functions; no I/O. Imported on the host by the runner and inside the
guest by the guest tests (the checkout is the same path in both).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Node:
    """One NUMA node: its CPUs by qemu index ("" = memory-only) and its memory."""

    cpus: tuple[int, ...]
    mem_mib: int


@dataclass(frozen=True)
class GuestTopology:
    name: str
    sockets: int
    cores: int  # per socket
    threads: int  # per core
    nodes: tuple[Node, ...]
    #: full distance matrix, row = from, column = to (may be asymmetric)
    distances: tuple[tuple[int, ...], ...]
    #: CPUs present at boot; the rest of sockets*cores*threads are possible but absent
    present: int | None = None
    #: NUMA nodes that get a PCIe expander bridge carrying a virtio-blk, a virtio-net and an edu device
    pci_numa_nodes: tuple[int, ...] = ()
    #: cgroup layout the tier boots this shape with
    cgroup: str = "v2"
    description: str = ""
    extra_args: tuple[str, ...] = field(default=())
    #: PID 1 of the guest: "busybox" (the tier's /init runs the command itself) or "systemd"
    #: (/init switches root to the host's systemd, which runs the command as a unit)
    init: str = "busybox"
    #: guest test files this shape runs (paths under tests/vm/guest); empty = all of them
    guest_tests: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.nodes)
        if len(self.distances) != n or any(len(row) != n for row in self.distances):
            raise ValueError(f"{self.name}: distance matrix must be {n}x{n}")
        if any(self.distances[i][i] != 10 for i in range(n)):
            raise ValueError(f"{self.name}: local distance must be 10")
        seen = [c for node in self.nodes for c in node.cpus]
        if sorted(seen) != list(range(self.maxcpus)):
            raise ValueError(f"{self.name}: nodes must partition CPUs 0-{self.maxcpus - 1}")
        if self.cgroup not in ("v1", "v2", "hybrid", "none"):
            raise ValueError(f"{self.name}: unknown cgroup layout {self.cgroup!r}")
        if self.init not in ("busybox", "systemd"):
            raise ValueError(f"{self.name}: unknown init {self.init!r}")
        if self.init == "systemd" and self.cgroup != "v2":
            raise ValueError(f"{self.name}: a systemd guest mounts cgroup v2 itself (cgroup must be 'v2')")

    # -- what the guest must show -------------------------------------------------------
    @property
    def maxcpus(self) -> int:
        return self.sockets * self.cores * self.threads

    @property
    def ncpus(self) -> int:
        return self.present if self.present is not None else self.maxcpus

    @property
    def mem_mib(self) -> int:
        return sum(n.mem_mib for n in self.nodes)

    def package_of(self, cpu: int) -> int:
        return cpu // (self.cores * self.threads)

    def core_of(self, cpu: int) -> int:
        """Core index within its package (qemu numbers threads innermost)."""
        return (cpu // self.threads) % self.cores

    def siblings_of(self, cpu: int) -> tuple[int, ...]:
        first = cpu - cpu % self.threads
        return tuple(range(first, first + self.threads))

    def node_of(self, cpu: int) -> int:
        return next(i for i, n in enumerate(self.nodes) if cpu in n.cpus)

    def present_cpus(self) -> tuple[int, ...]:
        return tuple(range(self.ncpus))

    def node_cpus_present(self, node: int) -> tuple[int, ...]:
        """A node's CPUs as the kernel lists them: only the present ones."""
        return tuple(c for c in self.nodes[node].cpus if c < self.ncpus)

    def memory_only_nodes(self) -> tuple[int, ...]:
        return tuple(i for i, n in enumerate(self.nodes) if not n.cpus)

    # -- qemu command line ----------------------------------------------------------------
    def qemu_args(self) -> list[str]:
        smp = f"{self.ncpus},sockets={self.sockets},cores={self.cores},threads={self.threads}"
        if self.ncpus != self.maxcpus:
            smp += f",maxcpus={self.maxcpus}"
        args = ["-smp", smp, "-m", f"{self.mem_mib}M"]
        for i, node in enumerate(self.nodes):
            args += ["-object", f"memory-backend-ram,id=mem{i},size={node.mem_mib}M"]
            spec = f"node,nodeid={i},memdev=mem{i}"
            for lo, hi in _ranges(node.cpus):
                spec += f",cpus={lo}-{hi}" if hi != lo else f",cpus={lo}"
            args += ["-numa", spec]
        for i, row in enumerate(self.distances):
            for j, d in enumerate(row):
                if i != j:
                    args += ["-numa", f"dist,src={i},dst={j},val={d}"]
        for k, node in enumerate(self.pci_numa_nodes):
            args += _pxb_args(k, node)
        return args + list(self.extra_args)


def _ranges(ids: tuple[int, ...]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for c in sorted(ids):
        if out and c == out[-1][1] + 1:
            out[-1] = (out[-1][0], c)
        else:
            out.append((c, c))
    return out


#: devices put behind each expander bridge; their PCI numa_node is the bridge's
PCI_DEVICES_PER_NODE = ("virtio-blk-pci", "virtio-net-pci", "edu")


def _pxb_args(k: int, node: int) -> list[str]:
    """A PCIe expander bridge on `node` with one root port per device (q35 needs ports)."""
    pxb = f"pxb{k}"
    args = ["-device", f"pxb-pcie,id={pxb},bus_nr={0x40 * (k + 1)},numa_node={node},bus=pcie.0"]
    for s, dev in enumerate(PCI_DEVICES_PER_NODE):
        port = f"{pxb}p{s}"
        args += ["-device", f"pcie-root-port,id={port},bus={pxb},chassis={10 * (k + 1) + s},slot={s}"]
        if dev == "virtio-blk-pci":
            args += ["-blockdev", f"driver=null-co,node-name=nullblk{k},size=67108864,read-zeroes=on",
                     "-device", f"virtio-blk-pci,bus={port},drive=nullblk{k},serial=vmtest-n{node}"]
        elif dev == "virtio-net-pci":
            args += ["-netdev", f"hubport,id=net{k},hubid={k}",
                     "-device", f"virtio-net-pci,bus={port},netdev=net{k},mac=52:54:00:00:0{node}:0{k}"]
        else:
            args += ["-device", f"{dev},bus={port}"]
    return args


TOPOLOGIES: dict[str, GuestTopology] = {
    t.name: t
    for t in (
        GuestTopology(
            name="numa2",
            description="2 sockets x 2 cores x 2 threads, one NUMA node per socket, PCIe devices on both nodes",
            sockets=2, cores=2, threads=2,
            nodes=(Node((0, 1, 2, 3), 2048), Node((4, 5, 6, 7), 2048)),
            distances=((10, 20), (20, 10)),
            pci_numa_nodes=(0, 1),
            cgroup="v2",
        ),
        GuestTopology(
            name="numa4",
            description="2 sockets x 2 cores x 2 threads, two NUMA nodes per socket (sub-NUMA), asymmetric "
            "distances, PCIe devices on nodes 1 and 3",
            sockets=2, cores=2, threads=2,
            nodes=(Node((0, 1), 768), Node((2, 3), 768), Node((4, 5), 768), Node((6, 7), 768)),
            # row = from; 0->3 (31) differs from 3->0 (33): the reader must keep direction
            distances=(
                (10, 12, 21, 31),
                (12, 10, 31, 21),
                (21, 31, 10, 12),
                (33, 21, 12, 10),
            ),
            pci_numa_nodes=(1, 3),
            cgroup="v1",
        ),
        GuestTopology(
            name="memonly",
            description="6 of 8 CPUs present (2 possible, absent), 2 CPU nodes + a memory-only node",
            sockets=2, cores=2, threads=2, present=6,
            nodes=(Node((0, 1, 2, 3), 1024), Node((4, 5, 6, 7), 1024), Node((), 512)),
            distances=((10, 20, 17), (20, 10, 28), (17, 28, 10)),
            cgroup="hybrid",
        ),
        GuestTopology(
            name="v2peers",
            description="numa2's shape without its PCIe devices, cgroup v2: a private containerd with NRI and "
            "slurmctld + slurmd (cgroup/v2 plugin) beside hwagent on a real v2 kernel",
            sockets=2, cores=2, threads=2,
            nodes=(Node((0, 1, 2, 3), 2048), Node((4, 5, 6, 7), 2048)),
            distances=((10, 20), (20, 10)),
            cgroup="v2",
            # a guest of their own: numa2's suite alone takes 9-20 min of its 25, these two ~10 more
            guest_tests=("test_nri.py", "test_slurm.py"),
        ),
        GuestTopology(
            name="systemd",
            description="systemd as PID 1 (the host's, over the root overlay), 2 CPUs, cgroup v2: "
            "the shipped unit under a real service manager",
            sockets=1, cores=2, threads=1,
            nodes=(Node((0, 1), 1536),),
            distances=((10,),),
            cgroup="v2",
            init="systemd",
            guest_tests=("test_systemd_unit.py",),
        ),
    )
}
