"""`hwagent devices`: the device inventory with NUMA node, resource and health.

Reads sysfs (or a fixture tree with --sysfs-root) and applies the configured
resource rules exactly as the daemon does, so an operator can check a rules
change before restarting. Health here is what the rules alone say (a device
whose driver does not match is not offered); probe verdicts live in the
running daemon.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from agent.cli import CommandError
from agent.commands._format import add_format_option


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "devices",
        help="list devices with NUMA node, resource and health",
        description="List PCI functions, disks and network interfaces with their NUMA node, "
                    "the extended resource they are offered as, and health.",
    )
    p.add_argument("--config", metavar="FILE", help="TOML config file ([devices] rules, [daemon] sysfs_root)")
    p.add_argument("--sysfs-root", metavar="DIR", help="sysfs tree to read (default: config, /sys)")
    add_format_option(p, ("text", "json"))
    p.add_argument("--offered", action="store_true", help="only devices offered as a resource")
    p.set_defaults(func=run)


def _rows(inv, assignment) -> list[dict]:
    owner = assignment.owner_map()
    rows = []
    for d in inv:
        res = owner.get(d.id)
        conflict = assignment.conflicts.get(d.id)
        if conflict:
            health = "-"
        elif res is None:
            health = "-"
        else:
            health = "Unhealthy" if d.id in assignment.unhealthy else "Healthy"
        rows.append({
            "id": d.id,
            "kind": d.kind,
            "vendor": d.pci.vendor if d.pci else None,
            "device": d.pci.device if d.pci else None,
            "class": d.pci.class_code if d.pci else None,
            "driver": d.driver,
            "numa_node": d.numa_node,
            "local_cpus": str(d.local_cpus) if d.local_cpus is not None else None,
            "iommu_group": d.pci.iommu_group if d.pci else None,
            "sriov": ("vf of " + d.pci.physfn) if d.pci and d.pci.physfn else
                     (f"pf {d.pci.sriov_numvfs}/{d.pci.sriov_totalvfs} vfs" if d.pci and d.pci.is_pf else None),
            "parent_pci": d.parent_pci,
            "dev_nodes": [n.path for n in d.dev_nodes],
            "children": list(d.block_children) + list(d.net_children),
            "resource": res,
            "conflict": list(conflict) if conflict else None,
            "health": health,
            "reason": assignment.unhealthy.get(d.id),
        })
    return rows


def _text(rows: list[dict]) -> str:
    head = ("ID", "KIND", "IDS", "CLASS", "DRIVER", "NUMA", "RESOURCE", "HEALTH", "NODES/CHILDREN")
    table = [head]
    for r in rows:
        res = r["resource"] or ("CONFLICT:" + "+".join(r["conflict"]) if r["conflict"] else "-")
        table.append((
            r["id"], r["kind"],
            f"{r['vendor']}:{r['device']}" if r["vendor"] else "-",
            r["class"] or "-", r["driver"] or "-",
            "-" if r["numa_node"] is None else str(r["numa_node"]),
            res, r["health"],
            ",".join(r["dev_nodes"] + r["children"]) or "-",
        ))
    widths = [max(len(row[i]) for row in table) for i in range(len(head) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] for row in table)


def run(args: argparse.Namespace) -> int:
    from agent.config import ConfigError, load
    from agent.devices.rules import assign, effective_rules
    from agent.devices.udev import discover

    try:
        config = load(args.config)
    except ConfigError as e:
        raise CommandError(str(e)) from None
    cfg = config["devices"]
    sysfs_root = args.sysfs_root or config["daemon"].sysfs_root
    if not os.path.isdir(os.path.join(sysfs_root, "bus")) and not os.path.isdir(os.path.join(sysfs_root, "class")):
        raise CommandError(f"{sysfs_root} does not look like a sysfs tree (no bus/ or class/)")
    inv = discover(sysfs_root, cfg.dev_root)
    assignment = assign(inv, effective_rules(cfg))
    rows = _rows(inv, assignment)
    if args.offered:
        rows = [r for r in rows if r["resource"] or r["conflict"]]
    if args.format == "json":
        print(json.dumps({"sysfs_root": sysfs_root, "devices": rows,
                          "resources": {k: list(v) for k, v in assignment.members.items()},
                          "warnings": list(inv.warnings)}, indent=2))
    else:
        print(_text(rows))
    if assignment.conflicts:
        for dev, rs in sorted(assignment.conflicts.items()):
            print(f"hwagent devices: error: {dev} is matched by {' and '.join(rs)}; "
                  "a device may belong to one resource only", file=sys.stderr)
        return 1
    return 0
