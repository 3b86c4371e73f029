"""The slurm.conf node line (``NodeName=... CPUs= Boards= ... RealMemory=``) from hwagent's reading.

slurmctld drains a node whose slurmd reports fewer CPUs, fewer
sockets*cores*threads or less memory than its slurm.conf line says ("Low CPUs",
"Low socket*core*thread count", "Low RealMemory"), and slurmd logs "Node
configuration differs from hardware" when the line's CPUs, sockets, cores per
socket or threads per core are not what it counts. So the line here is what
slurmd counts (``xcpuinfo_hwloc_topo_get``, ``get_memory``), written so that
slurm.conf's own rules read it back unchanged:

- CPUs: the online CPUs; ThreadsPerCore: CPUs // cores; CoresPerSocket:
  cores // sockets (slurmd's integer divisions). Where a division leaves a
  remainder (cores hidden by a CPU offline, uneven sockets) CPUs is written as
  the product, never above what slurmd reports, and a note says what is lost;
- Boards=1 and SocketsPerBoard = every socket: boards are not validated by
  slurmctld, and slurmd -C's boards (hwloc Groups below the machine) can give a
  SocketsPerBoard that truncates (17 boards of 64 sockets -> 3 per board);
- RealMemory: ``sysconf(_SC_PHYS_PAGES)`` (MemTotal) times the page size in MiB,
  computed as slurmd does, through a C ``float`` (pages above 2**24 round);
- CpuSpecList / CoreSpecCount and MemSpecLimit from hwagent's reserved CPUs
  and memory, where configured.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from agent.cpuset import CPUSet
from agent.slurm.cores import SlurmCores
from agent.topology.model import Topology

__all__ = ["NodeShape", "NodeLine", "node_shape", "real_memory_mib", "mem_spec_mib", "cpu_spec", "render_node_line"]

MIB = 1 << 20


@dataclass(frozen=True)
class NodeShape:
    """CPU counts as slurm.conf's node line writes them, and why they are not the whole machine."""

    cpus: int
    boards: int
    sockets_per_board: int
    cores_per_socket: int
    threads_per_core: int
    notes: tuple[str, ...] = ()


def node_shape(topo: Topology) -> NodeShape:
    """slurmd's counts from the topology: sockets holding cores, cores, online CPUs."""
    sockets = max(1, len(topo.package_ids))
    cores = max(1, len(topo.cores))
    cpus = len(topo.cpus)
    threads = max(1, cpus // cores)
    per_socket = max(1, cores // sockets)
    notes = []
    if cores % sockets:
        notes.append(f"{cores} cores do not divide over {sockets} sockets: Slurm counts {per_socket} per socket, "
                     f"{cores - per_socket * sockets} core(s) stay unused (slurmd logs 'Core count ({cores}) not "
                     f"multiple of socket count ({sockets})')")
    if cpus % cores:
        notes.append(f"{cpus} CPUs do not divide over {cores} cores: Slurm counts {threads} thread(s) per core")
    product = sockets * per_socket * threads
    if product != cpus:
        notes.append(f"CPUs={product}, not the {cpus} online: slurm.conf resets a CPUs= that is not "
                     "Sockets*CoresPerSocket*ThreadsPerCore")
    return NodeShape(product, 1, sockets, per_socket, threads, tuple(notes))


def real_memory_mib(memtotal_kib: int, page_size: int) -> int:
    """slurmd's RealMemory: ``(uint64_t)((float)pages * (page_size / 1048576.0))``, pages being
    ``sysconf(_SC_PHYS_PAGES)`` (MemTotal / page size). The float keeps 24 bits, so above 64 GiB of
    4 KiB pages the page count rounds and the MiB can fall one below MemTotal's: a line written from
    MemTotal alone would then be above what slurmd reports, and drained ("Low RealMemory")."""
    if memtotal_kib < 0 or page_size <= 0:
        raise ValueError(f"MemTotal {memtotal_kib} kB and page size {page_size} must be positive")
    pages = memtotal_kib * 1024 // page_size
    as_float: float = struct.unpack("f", struct.pack("f", float(pages)))[0]
    return int(as_float * (page_size / 1048576.0))


def mem_spec_mib(reserved_bytes: int) -> int | None:
    """MemSpecLimit in MiB for hwagent's reserved memory, rounded up (Slurm keeps back at least as much
    as hwagent does); None when nothing is reserved."""
    if reserved_bytes <= 0:
        return None
    return -(-reserved_bytes // MIB)


def cpu_spec(topo: Topology, reserved: CPUSet, style: str) -> tuple[str, str] | None:
    """hwagent's reserved CPUs as slurm.conf's ``CpuSpecList`` (abstract CPU ids of the same CPUs;
    Slurm widens them to whole cores) or ``CoreSpecCount`` (how many cores they touch; Slurm then
    picks which). None when none are reserved."""
    if not reserved:
        return None
    sc = SlurmCores(topo)
    if style == "list":
        return "CpuSpecList", str(sc.abstract_cpus(reserved))
    if style == "count":
        return "CoreSpecCount", str(len(sc.cores_of(reserved)))
    raise ValueError(f"cpu spec style must be list or count, got {style!r}")


@dataclass(frozen=True)
class NodeLine:
    """Everything the slurm.conf ``NodeName=`` line says."""

    node_name: str
    shape: NodeShape
    real_memory: int | None
    spec: tuple[str, str] | None = None
    mem_spec_limit: int | None = None
    gres: tuple[str, ...] = ()


def render_node_line(line: NodeLine) -> str:
    s = line.shape
    parts = [f"NodeName={line.node_name}", f"CPUs={s.cpus}", f"Boards={s.boards}",
             f"SocketsPerBoard={s.sockets_per_board}", f"CoresPerSocket={s.cores_per_socket}",
             f"ThreadsPerCore={s.threads_per_core}"]
    if line.real_memory is not None:
        parts.append(f"RealMemory={line.real_memory}")
    if line.spec is not None:
        parts.append(f"{line.spec[0]}={line.spec[1]}")
    if line.mem_spec_limit is not None:
        parts.append(f"MemSpecLimit={line.mem_spec_limit}")
    if line.gres:
        parts.append("Gres=" + ",".join(line.gres))
    return " ".join(parts)
