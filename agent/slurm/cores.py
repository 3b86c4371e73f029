"""Slurm's abstract core and CPU numbering, from hwagent's ``Topology``.

Slurm never names a core by the kernel's CPU ids: gres.conf ``Cores=`` and
slurm.conf ``CpuSpecList=`` use *abstract* ids, so that one configuration means
the same on machines that number their CPUs differently. slurmd builds the map
from hwloc (``xcpuinfo_hwloc_topo_get``): sockets in hwloc's logical order, the
cores of each socket in order, so core 0 is the first core of the first socket
and core 1 the second core of the first socket ("Core L#" of ``lstopo -l``);
abstract CPU ``core * ThreadsPerCore + t`` is the t-th thread of that core.
hwloc orders siblings by their CPU sets, so logical order is the order of each
package's, then each core's, lowest CPU id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from agent.cpuset import CPUSet
from agent.topology.model import Core, Topology

__all__ = ["SlurmCores"]


@dataclass(frozen=True)
class SlurmCores:
    """The cores of one topology in Slurm's abstract order."""

    topology: Topology

    @cached_property
    def ordered(self) -> tuple[Core, ...]:
        """Cores in hwloc's logical order: a depth-first walk of the nested CPU sets, smaller
        lowest CPU first at every level (package, die/cluster, NUMA node, L3, core)."""
        topo = self.topology
        online = topo.online
        levels = [topo.cpus_of_package(p) for p in topo.package_ids]
        levels += [g.cpus & online for g in topo.groups]
        levels += [n.cpus & online for n in topo.numa_nodes if n.cpus]
        levels += [c.cpus & online for c in topo.caches if c.level == 3 and c.type != "Instruction"]
        return _depth_first(levels, topo.cores)

    @cached_property
    def _index(self) -> dict[Core, int]:
        return {k: i for i, k in enumerate(self.ordered)}

    def index(self, core: Core) -> int:
        """The abstract index of ``core`` (gres.conf ``Cores=``)."""
        return self._index[core]

    def cores_of(self, cpus: CPUSet) -> CPUSet:
        """Abstract indices of the cores with a CPU in ``cpus`` (Slurm binds whole cores)."""
        online = self.topology.online
        return CPUSet(self._index[self.topology.core_of(c)] for c in cpus if c in online)

    def abstract_cpus(self, cpus: Iterable[int]) -> CPUSet:
        """Abstract CPU ids (``CpuSpecList=``) of these kernel CPU ids: a core's abstract index times
        ThreadsPerCore plus the thread's position in its core (slurmd's block map)."""
        threads = self.topology.threads_per_core
        out = []
        for c in cpus:
            core = self.topology.core_of(c)
            out.append(self._index[core] * threads + core.cpus.sorted().index(c))
        return CPUSet(out)


def _depth_first(sets: Iterable[CPUSet], cores: Iterable[Core]) -> tuple[Core, ...]:
    """The cores in the order of a depth-first walk of the tree the sets make by inclusion.

    A set sorts by its chain of ancestors: the lowest CPU of each enclosing set, outermost
    first, then its own. Sets that are not nested in one another (hwloc would refuse the
    later one) are placed under the largest set that holds them whole.
    """
    distinct = sorted({s for s in sets if s}, key=lambda s: (-len(s), s.first()))
    key_of: dict[CPUSet, tuple[int, ...]] = {}
    for s in distinct:  # largest first, so a set's parent has its key already
        parent = min((p for p in key_of if s < p), key=len, default=None)
        key_of[s] = (key_of[parent] if parent is not None else ()) + (s.first(),)

    def core_key(k: Core) -> tuple[tuple[int, ...], int]:
        parent = min((p for p in key_of if k.cpus <= p), key=len, default=None)
        return (key_of[parent] if parent is not None else (), k.first_cpu)

    return tuple(sorted(cores, key=core_key))
