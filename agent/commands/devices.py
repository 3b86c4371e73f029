"""`hwagent devices`: the device inventory with NUMA node, resource and health.

Reads sysfs (or a fixture tree with --sysfs-root) and applies the configured
resource rules exactly as the daemon does, so an operator can check a rules
change before restarting. Health here is what the rules alone say (a device
whose driver does not match is not offered); probe verdicts live in the
running daemon.

The default text view groups devices by NUMA node and resource, with PCI
vendor/device/class names from pci.ids (optional; hex ids without it), and
sums up the devices no rule offers by class, so a 150-function machine reads
in a screen; ``--all`` (or ``--offered``) prints one row per device.

``--format resourceslice`` prints the node's ``resource.k8s.io/v1``
ResourceSlices as a multi-document YAML stream (``---`` before each, one per
resource, ``agent.dra.slices``), as ``kubectl apply -f -`` reads it: the devices
and attributes a DRA claim's CEL selectors are evaluated on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from agent.daemonconfig import DAEMON_SECTION
from agent.devices.config import DEVICES_SECTION
from agent.cli import CommandError
from agent.commands._format import add_format_option


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "devices",
        help="list devices with NUMA node, resource and health",
        description="List PCI functions, disks and network interfaces with their NUMA node, "
                    "the extended resource they are offered as, and health.",
    )
    p.add_argument("--config", metavar="FILE",
                   help="TOML config file ([devices] rules, [daemon] sysfs_root; default: the running daemon's)")
    p.add_argument("--root-dir", metavar="DIR",
                   help="read the config of the daemon running on DIR (when several run)")
    p.add_argument("--sysfs-root", metavar="DIR", help="sysfs tree to read (default: config, /sys)")
    add_format_option(p, ("text", "json", "resourceslice"))
    p.add_argument("--node-name", metavar="NAME",
                   help="node name in the ResourceSlices (default: $NODE_NAME, else the host name)")
    p.add_argument("--offered", action="store_true", help="only devices offered as a resource (one row each)")
    p.add_argument("--all", action="store_true", help="one row per device instead of the grouped view")
    p.set_defaults(func=run)


def _rows(inv, assignment, names=None) -> list[dict]:
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
            "vendor_name": names.vendor(d.pci.vendor) if names and d.pci else None,
            "device_name": names.device(d.pci.vendor, d.pci.device) if names and d.pci else None,
            "class_name": names.class_name(d.pci.class_code[:4]) if names and d.pci else None,
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
    head = ("ID", "KIND", "IDS", "CLASS", "DRIVER", "NUMA", "RESOURCE", "HEALTH", "NAME", "NODES/CHILDREN")
    table = [head]
    for r in rows:
        res = r["resource"] or ("CONFLICT:" + "+".join(r["conflict"]) if r["conflict"] else "-")
        table.append((
            r["id"], r["kind"],
            f"{r['vendor']}:{r['device']}" if r["vendor"] else "-",
            r["class"] or "-", r["driver"] or "-",
            "-" if r["numa_node"] is None else str(r["numa_node"]),
            res, r["health"],
            " ".join(x for x in (_short(r["vendor_name"]), r["device_name"] or r["class_name"]) if x) or "-",
            ",".join(r["dev_nodes"] + r["children"]) or "-",
        ))
    widths = [max(len(row[i]) for row in table) for i in range(len(head) - 1)]  # the last column is not padded
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[-1] for row in table)


def _name(r: dict) -> str:
    if r["kind"] != "pci":
        return r["kind"]
    ids = f"{r['vendor']}:{r['device']}"
    named = " ".join(x for x in (_short(r["vendor_name"]), r["device_name"]) if x)
    return f"{named} [{ids}]" if named else ids


def _short(vendor: str | None) -> str | None:
    from agent.devices.pciids import _short_vendor

    return _short_vendor(vendor) if vendor else None


def _grouped(rows: list[dict]) -> str:
    """By NUMA node, then resource; what no rule offers summed up by class."""
    by_node: dict[int | None, list[dict]] = {}
    for r in rows:
        by_node.setdefault(r["numa_node"], []).append(r)
    lines: list[str] = []
    for node in sorted(by_node, key=lambda n: (n is None, n if n is not None else 0)):
        members = by_node[node]
        lines.append(f"NUMA node {node}" if node is not None else "no NUMA node")
        by_res: dict[str, list[dict]] = {}
        for r in members:
            res = r["resource"] or ("CONFLICT " + "+".join(r["conflict"]) if r["conflict"] else "")
            by_res.setdefault(res, []).append(r)
        for res in sorted(k for k in by_res if k):
            devs = by_res[res]
            bad = sum(1 for r in devs if r["health"] == "Unhealthy")
            lines.append(f"  {res}: {len(devs)} device{'s' if len(devs) != 1 else ''}" + (f", {bad} unhealthy" if bad else ""))
            for r in devs:
                nodes = ",".join(r["dev_nodes"] + r["children"])
                reason = f" ({r['reason']})" if r["reason"] else ""
                lines.append(f"    {r['id']:<14} {r['health']:<9} {_name(r)}  {r['driver'] or '-'}  {nodes}{reason}".rstrip())
        rest = by_res.get("", [])
        if rest:
            kinds: dict[str, int] = {}
            for r in rest:
                what = r["class_name"] or (f"class {r['class']}" if r["class"] else r["kind"])
                kinds[what] = kinds.get(what, 0) + 1
            summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
            lines.append(f"  not offered: {len(rest)} ({summary})")
    lines.append("")
    lines.append("--all lists every device; --format json has every field")
    return "\n".join(lines)


def _resourceslices(inv, assignment, config, node: str | None) -> str:
    import yaml

    from agent.devices.rules import effective_rules, offered_through
    from agent.dra.config import DEFAULT_DRIVER, DRA_SECTION
    from agent.dra.slices import block_sizes, build_slices, local_node_name

    try:
        driver = config[DRA_SECTION].driver_name
    except KeyError:  # a config without the [dra] section registered
        driver = DEFAULT_DRIVER
    # only the resources offered through DRA (api = "dra"): the others are the device plugins'
    dra = offered_through(effective_rules(config[DEVICES_SECTION]), "dra")
    slices = build_slices(inv, assignment.restricted_to(dra), node or local_node_name(), driver, block_sizes(inv))

    class Dumper(yaml.SafeDumper):
        """Strings that start like a number are quoted ("0953", "010802"): a YAML 1.2 reader takes
        them for integers otherwise."""

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "'" if value[:1].isdigit() else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    # one document per object, `---` before each: what kubectl's decoder reads (a sequence in one
    # document is refused as "cannot unmarshal array into ... unstructured.detector")
    return yaml.dump_all(slices, Dumper=Dumper, sort_keys=False, default_flow_style=False, explicit_start=True)


def run(args: argparse.Namespace) -> int:
    from agent.commands._config import load_config
    from agent.devices.rules import assign, effective_rules
    from agent.devices.udev import discover

    config = load_config(args)
    cfg = config[DEVICES_SECTION]
    sysfs_root = args.sysfs_root or config[DAEMON_SECTION].sysfs_root
    if not os.path.isdir(os.path.join(sysfs_root, "bus")) and not os.path.isdir(os.path.join(sysfs_root, "class")):
        raise CommandError(f"{sysfs_root} does not look like a sysfs tree (no bus/ or class/)")
    inv = discover(sysfs_root, cfg.dev_root)
    assignment = assign(inv, effective_rules(cfg))
    from agent.devices.pciids import load as load_pci_names

    if args.format == "resourceslice":
        print(_resourceslices(inv, assignment, config, args.node_name), end="")
        return 1 if assignment.conflicts else 0
    rows = _rows(inv, assignment, load_pci_names())
    if args.offered:
        rows = [r for r in rows if r["resource"] or r["conflict"]]
    if args.format == "json":
        print(json.dumps({"sysfs_root": sysfs_root, "devices": rows,
                          "resources": {k: list(v) for k, v in assignment.members.items()},
                          "warnings": list(inv.warnings)}, indent=2))
    elif args.all or args.offered:
        print(_text(rows))
    else:
        print(_grouped(rows))
    if assignment.conflicts:
        for dev, rs in sorted(assignment.conflicts.items()):
            print(f"hwagent devices: error: {dev} is matched by {' and '.join(rs)}; "
                  "a device may belong to one resource only", file=sys.stderr)
        return 1
    return 0
