"""Hand-made sysfs/procfs trees for the reader's degradation tests.

``FakeMachine`` writes a small, valid two-socket tree by default; tests then
delete or corrupt exactly the files whose absence they are about, so every
test states its one deviation from a healthy machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agent.cpuset import CPUSet


@dataclass
class FakeMachine:
    """2 packages x 2 cores x 2 threads (siblings spread: cpu N and N+4), one node per package."""

    root: Path
    packages: int = 2
    cores_per_package: int = 2
    threads: int = 2
    node_mem_kb: int = 4 << 20
    extra_nodes: dict[int, int] = field(default_factory=dict)  # memory-only node id -> kB

    @property
    def sys(self) -> Path:
        return self.root / "sys"

    @property
    def proc(self) -> Path:
        return self.root / "proc"

    @property
    def cpu_dir(self) -> Path:
        return self.sys / "devices/system/cpu"

    @property
    def node_dir(self) -> Path:
        return self.sys / "devices/system/node"

    @property
    def ncores(self) -> int:
        return self.packages * self.cores_per_package

    @property
    def ncpus(self) -> int:
        return self.ncores * self.threads

    def core_index(self, cpu: int) -> int:
        return cpu % self.ncores

    def siblings(self, cpu: int) -> CPUSet:
        k = self.core_index(cpu)
        return CPUSet(k + t * self.ncores for t in range(self.threads))

    def package(self, cpu: int) -> int:
        return self.core_index(cpu) // self.cores_per_package

    def package_cpus(self, pkg: int) -> CPUSet:
        return CPUSet(c for c in range(self.ncpus) if self.package(c) == pkg)

    def write(self, rel: str | Path, text: str) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p

    def build(self) -> FakeMachine:
        allc = CPUSet(range(self.ncpus))
        cd = "sys/devices/system/cpu"
        for name in ("online", "possible", "present"):
            self.write(f"{cd}/{name}", f"{allc}\n")
        self.write(f"{cd}/offline", "\n")
        self.write(f"{cd}/isolated", "\n")
        for c in range(self.ncpus):
            t = f"{cd}/cpu{c}/topology"
            sib = self.siblings(c)
            pkg = self.package(c)
            self.write(f"{t}/physical_package_id", f"{pkg}\n")
            self.write(f"{t}/die_id", "0\n")
            self.write(f"{t}/core_id", f"{self.core_index(c) % self.cores_per_package}\n")
            self.write(f"{t}/core_cpus_list", f"{sib}\n")
            self.write(f"{t}/core_cpus", f"{sib.to_mask()}\n")
            self.write(f"{t}/thread_siblings_list", f"{sib}\n")
            self.write(f"{t}/package_cpus_list", f"{self.package_cpus(pkg)}\n")
            self.write(f"{t}/core_siblings_list", f"{self.package_cpus(pkg)}\n")
            caches = [
                (1, "Data", "48K", sib),
                (1, "Instruction", "32K", sib),
                (2, "Unified", "2048K", sib),
                (3, "Unified", "32768K", self.package_cpus(pkg)),
            ]
            for i, (level, ctype, size, shared) in enumerate(caches):
                d = f"{cd}/cpu{c}/cache/index{i}"
                self.write(f"{d}/level", f"{level}\n")
                self.write(f"{d}/type", f"{ctype}\n")
                self.write(f"{d}/size", f"{size}\n")
                self.write(f"{d}/shared_cpu_list", f"{shared}\n")
                self.write(f"{d}/shared_cpu_map", f"{shared.to_mask()}\n")
                self.write(f"{d}/coherency_line_size", "64\n")
                self.write(f"{d}/ways_of_associativity", "8\n")
                self.write(f"{d}/id", f"{min(shared) if level < 3 else pkg}\n")
        node_ids = list(range(self.packages)) + sorted(self.extra_nodes)
        nd = "sys/devices/system/node"
        self.write(f"{nd}/online", f"{CPUSet(node_ids)}\n")
        self.write(f"{nd}/possible", f"{CPUSet(node_ids)}\n")
        for n in node_ids:
            cpus = self.package_cpus(n) if n < self.packages else CPUSet()
            kb = self.node_mem_kb if n < self.packages else self.extra_nodes[n]
            self.write(f"{nd}/node{n}/cpulist", f"{cpus}\n")
            self.write(f"{nd}/node{n}/cpumap", f"{cpus.to_mask()}\n")
            self.write(f"{nd}/node{n}/meminfo", f"Node {n} MemTotal:       {kb} kB\nNode {n} MemFree: 1 kB\n")
            row = [10 if m == n else (21 if m < self.packages and n < self.packages else 30) for m in node_ids]
            self.write(f"{nd}/node{n}/distance", " ".join(map(str, row)) + "\n")
        self.write("proc/meminfo", f"MemTotal:       {self.node_mem_kb * self.packages} kB\n")
        self.write(
            "proc/cpuinfo",
            "".join(
                f"processor\t: {c}\nphysical id\t: {self.package(c)}\ncore id\t\t: {self.core_index(c)}\n\n"
                for c in range(self.ncpus)
            ),
        )
        return self

    def per_cpu_online(self, flags: dict[int, bool]) -> None:
        """Online state only in per-CPU files: no ``cpu/online`` or ``cpu/offline``.

        Older kernels have no ``cpu/online`` list, and a CPU that cannot be
        unplugged (often cpu0, on some machines others too) has no
        ``cpuN/online`` file: ``flags`` names the CPUs that have one and what
        it says; the rest have none. An offline CPU loses its ``topology`` and
        ``cache`` directories, as the kernel removes them at unplug.
        """
        self.remove("sys/devices/system/cpu/online")
        self.remove("sys/devices/system/cpu/offline")
        for cpu, online in flags.items():
            self.write(f"sys/devices/system/cpu/cpu{cpu}/online", "1\n" if online else "0\n")
            if not online:
                self.remove(f"sys/devices/system/cpu/cpu{cpu}/topology")
                self.remove(f"sys/devices/system/cpu/cpu{cpu}/cache")

    def remove(self, pattern: str) -> int:
        """Delete files matching a glob under the root; returns how many."""
        n = 0
        for p in sorted(self.root.glob(pattern), reverse=True):
            if p.is_dir():
                for q in sorted(p.rglob("*"), reverse=True):
                    q.rmdir() if q.is_dir() else q.unlink()
                p.rmdir()
            else:
                p.unlink()
            n += 1
        assert n, f"nothing matched {pattern}"
        return n


def amd_compute_unit_machine(root: Path, packages: int = 2, units_per_package: int = 2) -> FakeMachine:
    """An AMD family 15h (Bulldozer/Piledriver) shape: two integer cores per compute unit.

    What the kernel reports there, and what this tree reproduces: the two
    CPUs of a unit are each other's ``thread_siblings``/``core_cpus`` while
    carrying *different* ``core_id``s, and share the unit's L2 and L1i. One
    thread per core; ``/proc/cpuinfo`` names the vendor and family, and
    ``proc/hwloc-nofile-info`` the architecture, because hwloc reads both
    before trusting core ids over sibling lists.
    """
    m = FakeMachine(root, packages=packages, cores_per_package=2 * units_per_package, threads=1).build()
    cd = "sys/devices/system/cpu"
    for c in range(m.ncpus):
        unit = CPUSet([c - c % 2, c - c % 2 + 1])
        t = f"{cd}/cpu{c}/topology"
        for name in ("core_cpus", "thread_siblings"):
            m.write(f"{t}/{name}_list", f"{unit}\n")
            m.write(f"{t}/{name}", f"{unit.to_mask()}\n")
        pkg = m.package_cpus(m.package(c))
        m.write(f"{t}/package_cpus", f"{pkg.to_mask()}\n")  # hwloc reads the masks
        m.write(f"{t}/core_siblings", f"{pkg.to_mask()}\n")
        for index in (1, 2):  # L1i and L2 belong to the unit
            m.write(f"{cd}/cpu{c}/cache/index{index}/shared_cpu_list", f"{unit}\n")
            m.write(f"{cd}/cpu{c}/cache/index{index}/shared_cpu_map", f"{unit.to_mask()}\n")
    m.write(
        "proc/cpuinfo",
        "".join(
            f"processor\t: {c}\nvendor_id\t: AuthenticAMD\ncpu family\t: 21\nmodel\t\t: 2\n"
            f"physical id\t: {m.package(c)}\ncore id\t\t: {m.core_index(c) % m.cores_per_package}\n\n"
            for c in range(m.ncpus)
        ),
    )
    m.write("proc/hwloc-nofile-info", "OSName: Linux\nArchitecture: x86_64\n")
    return m
