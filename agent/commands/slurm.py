"""`hwagent slurm conf`: the node's slurm.conf line and gres.conf lines, from hwagent's reading.

Thin: reads the topology, MemTotal, the device inventory and the config (the same
readers and rules as `hwagent topology` and `hwagent devices`, so --sysfs-root
points it at a snapshot), and prints what ``agent.slurm`` decides. Notes on what
the line cannot say (uneven sockets, unhealthy devices) go to stderr, so that
stdout can be written straight into slurm.conf and gres.conf. docs/slurm.md.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

from agent.cli import CommandError

#: typing is not imported at run time (the CLI's start-up); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from agent.config import Config
    from agent.topology.model import Topology

__all__ = ["add_parser"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "slurm",
        help="Slurm mode: the node's slurm.conf and gres.conf lines, its health for HealthCheckProgram",
        description="Slurm mode (docs/slurm.md). `hwagent slurm conf` prints this node's slurm.conf NodeName line "
                    "and gres.conf lines from the hardware hwagent reads; `hwagent slurm health` reports the node's "
                    "problems as Slurm's HealthCheckProgram.",
    )
    sub = p.add_subparsers(dest="slurm_command", metavar="SUBCOMMAND")
    sub.required = True
    c = sub.add_parser(
        "conf",
        help="print the node's NodeName line (CPUs, sockets, cores, threads, RealMemory, reserved) and gres.conf",
        description="Print GresTypes=, the slurm.conf NodeName= line and the gres.conf lines for the devices "
                    "hwagent offers, as slurmd counts them (a node configured so is not drained for low "
                    "CPUs or memory). Notes on what Slurm cannot describe go to stderr.",
    )
    c.add_argument("--config", metavar="FILE",
                   help="TOML config ([devices] rules, [cpu]/[memory] reservations; default: the running daemon's)")
    c.add_argument("--root-dir", metavar="DIR", help="read the config of the daemon running on DIR")
    c.add_argument("--sysfs-root", metavar="DIR", help="sysfs to read (default: config, /sys)")
    c.add_argument("--procfs-root", metavar="DIR",
                   help="procfs to read (default: config for /sys, otherwise the proc/ beside --sysfs-root)")
    c.add_argument("--node-name", metavar="NAME", help="NodeName (default: the short host name, as slurmd's)")
    c.add_argument("--only", choices=("node", "gres"),
                   help="print only the NodeName line (node) or only the gres.conf lines (gres)")
    c.add_argument("--cpu-spec", choices=("list", "count"), default="list",
                   help="reserved CPUs as CpuSpecList (the same CPUs, default) or CoreSpecCount (Slurm picks)")
    c.add_argument("--gres-name", action="append", default=[], metavar="RESOURCE=NAME",
                   help="the GRES name for a resource (default: its last path part, e.g. example.com/x -> x)")
    c.set_defaults(func=run_conf)
    from agent.commands._slurmhealth import add_parser as add_health

    add_health(sub)


def _memtotal_kib(procfs_root: str) -> int | None:
    try:
        with open(os.path.join(procfs_root, "meminfo")) as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _gres_names(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        res, eq, name = pair.partition("=")
        if not eq or not res or not name:
            raise CommandError(f"--gres-name {pair!r}: write RESOURCE=NAME, e.g. example.com/scratch=scratch")
        out[res] = name
    return out


def _roots(args: argparse.Namespace, sysfs_default: str, procfs_default: str) -> tuple[str, str]:
    """--sysfs-root and --procfs-root, else the config's; a snapshot's proc/ lies beside its sys/."""
    from agent.commands.topology import default_procfs_root

    sysfs_root = args.sysfs_root or sysfs_default
    if args.procfs_root:
        return sysfs_root, args.procfs_root
    return sysfs_root, default_procfs_root(sysfs_root) if args.sysfs_root else procfs_default


def _cpu_spec(config: Config, topo: Topology, style: str, notes: list[str]) -> tuple[str, str] | None:
    """[cpu]'s reserved CPUs (resolved as the CPU policy resolves them) in slurm.conf's words."""
    from agent.cpu.calculator import TopoIndex
    from agent.cpu.config import CPU_SECTION
    from agent.cpu.policy import PolicyOptions, reserved_cpus
    from agent.slurm.nodeconf import cpu_spec

    cpu = config[CPU_SECTION]
    if not cpu.enabled or not (cpu.reserved_cpu_list or cpu.reserved_cpus):
        return None
    try:
        reserved = reserved_cpus(TopoIndex(topo), PolicyOptions(cpu.reserved_cpus, cpu.reserved_list()))
    except ValueError as e:
        raise CommandError(f"[cpu] reserved CPUs: {e}") from None
    if style == "list":
        notes.append(f"CpuSpecList names hwagent's reserved CPUs {reserved}; Slurm reserves their whole cores")
    return cpu_spec(topo, reserved, style)


def _reserved_memory_bytes(config: Config) -> int:
    """[memory]'s per-node ``memory`` reservations added up, else ``system_reserved_memory``."""
    from agent.memory.config import MEMORY_SECTION
    from agent.quantity import parse_quantity, to_units

    memory = config[MEMORY_SECTION]
    if not memory.enabled:
        return 0
    total = sum(t.get("memory", 0) for t in memory.reserved().values())
    if not total and memory.system_reserved_memory:
        total = to_units(parse_quantity(memory.system_reserved_memory))
    return total


def run_conf(args: argparse.Namespace) -> int:
    from agent.commands._config import load_config
    from agent.daemonconfig import DAEMON_SECTION
    from agent.devices.config import DEVICES_SECTION
    from agent.devices.rules import assign, effective_rules
    from agent.devices.udev import discover
    from agent.slurm.gres import GresNameError, gres_conf, render_gres_line
    from agent.slurm.nodeconf import NodeLine, mem_spec_mib, node_shape, real_memory_mib, render_node_line
    from agent.topology.sysfs import TopologyError, read_topology

    names = _gres_names(args.gres_name)
    config = load_config(args)
    daemon = config[DAEMON_SECTION]
    sysfs_root, procfs_root = _roots(args, daemon.sysfs_root, daemon.procfs_root)
    try:
        topo = read_topology(sysfs_root, procfs_root, log_warnings=False)
    except TopologyError as e:
        raise CommandError(str(e)) from None
    node = args.node_name or socket.gethostname().split(".")[0]
    shape = node_shape(topo)
    notes: list[str] = list(shape.notes)

    devices = config[DEVICES_SECTION]
    rules = effective_rules(devices)
    inv = discover(sysfs_root, devices.dev_root)
    assignment = assign(inv, rules)
    notes += [f"{dev} is matched by {' and '.join(rs)} and is left out (a device may belong to one resource only)"
              for dev, rs in sorted(assignment.conflicts.items())]
    try:
        gres = gres_conf(topo, inv, assignment, rules, names)
    except GresNameError as e:
        raise CommandError(str(e)) from None
    notes += gres.notes

    spec = _cpu_spec(config, topo, args.cpu_spec, notes)
    memtotal = _memtotal_kib(procfs_root)
    if memtotal is None:
        notes.append(f"no MemTotal in {procfs_root}/meminfo: RealMemory left out")
    real = real_memory_mib(memtotal, os.sysconf("SC_PAGE_SIZE")) if memtotal is not None else None
    mem_spec = mem_spec_mib(_reserved_memory_bytes(config))
    if mem_spec is not None and real is not None and mem_spec >= real:
        raise CommandError(f"[memory] reserves {mem_spec} MiB, not less than RealMemory={real}: "
                           "Slurm would reset MemSpecLimit to 0")

    line = NodeLine(node, shape, real, spec, mem_spec, gres.node_gres)
    out: list[str] = []
    if args.only is None:
        out.append(f"# slurm.conf (hwagent slurm conf, from {sysfs_root} and {procfs_root})")
        if gres.types:
            out.append("GresTypes=" + ",".join(gres.types))
    if args.only in (None, "node"):
        out.append(render_node_line(line))
    if args.only is None:
        out.append("# gres.conf")
    if args.only in (None, "gres"):
        out.extend(render_gres_line(node, g) for g in gres.lines)
    if out:
        print("\n".join(out))
    for n in notes:
        print(f"hwagent slurm conf: note: {n}", file=sys.stderr)
    return 1 if assignment.conflicts else 0
