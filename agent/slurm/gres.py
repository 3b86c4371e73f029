"""gres.conf lines for the devices hwagent offers, and the node line's ``Gres=``/``GresTypes=``.

One line per device that has device files (``File=``, or ``MultipleFiles=`` when
the rule hands out several nodes of one device: that is one unit in Slurm), and
one ``Count=`` line per group of devices without files (network interfaces, PCI
functions a rule gives no nodes). ``Cores=`` is the device's NUMA node's cores
in Slurm's abstract numbering (``agent.slurm.cores``); a device on no node, or
on a node without CPUs, gets no ``Cores=`` (any core may use it).

Names: Slurm's GRES name is one word (it is written ``name:type:count``), so a
resource ``example.com/fast-nvme`` becomes ``fast_nvme`` unless the caller
names it; two resources that would share a name are refused. ``Type=`` tells
PCI models apart (``pci_<vendor>_<device>``); block and net resources are
untyped (Slurm forbids typed and untyped lines of one name).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agent.cpuset import CPUSet
from agent.devices.config import ResourceRule
from agent.devices.model import Device, Inventory
from agent.devices.rules import Assignment, grant
from agent.slurm.cores import SlurmCores
from agent.topology.model import Topology

__all__ = ["GresLine", "GresConf", "GresNameError", "gres_name", "gres_conf", "render_gres_line"]

_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class GresNameError(ValueError):
    """A resource cannot be given a usable, distinct Slurm GRES name."""


@dataclass(frozen=True)
class GresLine:
    """One gres.conf line: a device with its files, or ``count`` file-less devices."""

    name: str
    type: str | None
    files: tuple[str, ...]
    count: int
    cores: CPUSet | None
    resource: str
    devices: tuple[str, ...]


@dataclass(frozen=True)
class GresConf:
    lines: tuple[GresLine, ...]
    #: the node line's ``Gres=`` entries, ``name[:type]:count``
    node_gres: tuple[str, ...]
    #: what slurm.conf's ``GresTypes=`` must list
    types: tuple[str, ...]
    notes: tuple[str, ...] = ()


def gres_name(resource: str) -> str:
    """``example.com/fast-nvme`` -> ``fast_nvme``: the part after the last ``/``, lower case, each
    character Slurm's ``name:type:count`` syntax could misread made ``_``."""
    tail = resource.rsplit("/", 1)[-1].lower()
    word = re.sub(r"[^a-z0-9_]", "_", tail)
    if not word or not word[0].isalpha():
        word = "r_" + word
    return word


def _names(resources: Iterable[str], given: Mapping[str, str]) -> dict[str, str]:
    for res, name in given.items():
        if not _WORD.match(name):
            raise GresNameError(f"GRES name {name!r} for {res}: use a letter, then letters, digits or _")
    out = {r: given.get(r) or gres_name(r) for r in resources}
    seen: dict[str, str] = {}
    for res, name in sorted(out.items()):
        if name.lower() in seen:
            raise GresNameError(f"{seen[name.lower()]} and {res} would both be GRES {name!r}: name one "
                                f"(--gres-name {res}=OTHER)")
        seen[name.lower()] = res
    return out


def _type(dev: Device) -> str | None:
    return f"pci_{dev.pci.vendor}_{dev.pci.device}" if dev.pci is not None else None


def _cores(topo: Topology, sc: SlurmCores, dev: Device) -> CPUSet | None:
    if dev.numa_node is None or dev.numa_node not in topo.numa_ids:
        return None
    cpus = topo.cpus_of_numa(dev.numa_node)
    return sc.cores_of(cpus) if cpus else None


def gres_conf(topo: Topology, inv: Inventory, assignment: Assignment, rules: Iterable[ResourceRule],
              names: Mapping[str, str] | None = None) -> GresConf:
    """The gres.conf lines for every device the rules place in a resource (healthy or not: a count that
    came and went with health would change the node's configuration; health is the drain's business)."""
    by_rule = {r.name: r for r in rules}
    named = _names(assignment.members, names or {})
    sc = SlurmCores(topo)
    lines: list[GresLine] = []
    notes: list[str] = []
    for resource, ids in assignment.members.items():
        rule = by_rule.get(resource)
        if rule is None:
            continue
        shared = set(rule.extra_dev_nodes)
        countable: dict[tuple[str | None, CPUSet | None], list[str]] = {}
        for dev_id in ids:
            dev = inv.get(dev_id)
            if dev is None:
                continue
            files = tuple(g.host_path for g in grant(rule, [dev]).devices if g.host_path not in shared)
            cores = _cores(topo, sc, dev)
            if files:
                lines.append(GresLine(named[resource], _type(dev), files, 1, cores, resource, (dev_id,)))
            else:
                countable.setdefault((_type(dev), cores), []).append(dev_id)
            if dev_id in assignment.unhealthy:
                notes.append(f"{dev_id} ({resource}) is unhealthy: {assignment.unhealthy[dev_id]}")
        for (typ, cores), devs in countable.items():
            lines.append(GresLine(named[resource], typ, (), len(devs), cores, resource, tuple(devs)))
        if shared:
            notes.append(f"{resource}: {', '.join(sorted(shared))} shared by every device is not a gres.conf File "
                         "(Slurm counts one unit per file)")
    totals: dict[tuple[str, str | None], int] = {}
    for g in lines:
        totals[(g.name, g.type)] = totals.get((g.name, g.type), 0) + g.count
    node_gres = tuple(f"{n}:{t}:{c}" if t else f"{n}:{c}" for (n, t), c in sorted(totals.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")))
    types = tuple(sorted({g.name for g in lines}))
    return GresConf(tuple(lines), node_gres, types, tuple(notes))


def render_gres_line(node_name: str, g: GresLine) -> str:
    parts = [f"NodeName={node_name}", f"Name={g.name}"]
    if g.type:
        parts.append(f"Type={g.type}")
    if len(g.files) == 1:
        parts.append(f"File={g.files[0]}")
    elif g.files:
        parts.append("MultipleFiles=" + ",".join(g.files))
    else:
        parts.append(f"Count={g.count}")
    if g.cores is not None:
        parts.append(f"Cores={g.cores}")
    return " ".join(parts)
