"""`hwagent topology`: show what the kernel says about CPUs, caches and NUMA, as text, JSON or a picture."""

from __future__ import annotations

import argparse
import os
import sys

from agent.cli import CommandError
from agent.commands._format import add_format_option
from agent.topology.sysfs import TopologyError, read_topology

__all__ = ["add_parser"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "topology",
        help="show CPU, cache and NUMA topology (text, JSON, SVG/PNG picture)",
        description=(
            "Read the CPU, core, cache and NUMA topology from sysfs and print it as a tree, "
            "as a JSON document (hwagent-topology/2, docs/topology.md), or as a picture "
            "(--format svg|png) with PCI devices under their NUMA node and, from the running daemon of the root "
            "dir (as cpus, resources and memory ask it; with none, its files), its CPU pools, dedicated "
            "allocations, device resources, pool pressure and memory. "
            "Point --sysfs-root at a snapshot's sys/ to read another machine."
        ),
    )
    p.add_argument("--sysfs-root", default="/sys", metavar="DIR", help="sysfs to read (default: /sys)")
    p.add_argument(
        "--procfs-root",
        default=None,
        metavar="DIR",
        help="procfs to read (default: /proc for /sys, otherwise the proc/ beside --sysfs-root)",
    )
    add_format_option(p, ("text", "json", "svg", "png"))
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--overlay", metavar="FILE", help="picture: colour from this hwagent-overlay/1 JSON file")
    p.add_argument("--config", metavar="FILE", help="picture: config naming the daemon's root dir and metrics address")
    p.add_argument("--root-dir", metavar="DIR", help="picture: the daemon's root dir (default: from the config)")
    p.add_argument("--no-live", action="store_true", help="picture: draw the hardware only, no daemon state")
    p.set_defaults(func=run)


def default_procfs_root(sysfs_root: str) -> str:
    """A snapshot's proc/ lies beside its sys/; mixing in this machine's /proc would mislead."""
    if os.path.abspath(sysfs_root) == "/sys":
        return "/proc"
    return os.path.join(os.path.dirname(os.path.abspath(sysfs_root)), "proc")


def _emit(args: argparse.Namespace, data: str | bytes) -> None:
    if args.output:
        mode = "wb" if isinstance(data, bytes) else "w"
        try:
            with open(args.output, mode) as f:
                f.write(data)
        except OSError as e:
            raise CommandError(f"cannot write {args.output}: {e.strerror}") from None
    elif isinstance(data, bytes):
        sys.stdout.buffer.write(data)
    else:
        sys.stdout.write(data)


def refuse_binary_to_terminal(args: argparse.Namespace) -> None:
    """A PNG on a terminal is a screenful of control bytes that can leave it garbled:
    refuse before any work, and say how to get the picture (as curl does)."""
    if args.format == "png" and not args.output and sys.stdout.isatty():
        raise CommandError("--format png writes binary, and stdout is a terminal: give -o FILE "
                           "(or pipe it: hwagent topology --format png > machine.png)")


def run(args: argparse.Namespace) -> int:
    refuse_binary_to_terminal(args)
    sysfs_root = args.sysfs_root
    procfs_root = args.procfs_root or default_procfs_root(sysfs_root)
    try:
        # the text tree and the JSON document carry every warning; a picture does not, so it logs them
        topo = read_topology(sysfs_root, procfs_root, log_warnings=args.format not in ("text", "json"))
    except TopologyError as e:
        hint = ""
        if os.path.isdir(os.path.join(sysfs_root, "sys", "devices", "system", "cpu")):
            hint = f" (it looks like a snapshot root: try --sysfs-root {os.path.join(sysfs_root, 'sys')})"
        raise CommandError(f"{e}{hint}") from None
    if args.format == "json":
        import json

        from agent.topology.document import to_document

        _emit(args, json.dumps(to_document(topo), indent=2) + "\n")
    elif args.format == "text":
        from agent.topology.render import render_text

        _emit(args, render_text(topo))
    else:
        _emit(args, _picture(args, topo, sysfs_root))
    return 0


def _picture(args: argparse.Namespace, topo, sysfs_root: str) -> str | bytes:
    import json

    from agent.devices.pciids import load as load_pci_names
    from agent.topology.io import device_items
    from agent.topology.overlay import Overlay, OverlayError
    from agent.topology.picture import Scale, build
    from agent.topology.svg import PngUnavailable, render_png, render_svg

    if args.overlay:
        try:
            with open(args.overlay) as f:
                overlay = Overlay.from_json(json.load(f), source=args.overlay)
        except OSError as e:
            raise CommandError(f"cannot read {args.overlay}: {e.strerror}") from None
        except (ValueError, OverlayError) as e:
            raise CommandError(f"{args.overlay}: {e}") from None
    elif args.no_live or (os.path.abspath(sysfs_root) != "/sys" and not args.root_dir):
        overlay = Overlay()  # a snapshot is another machine: this host's daemon state does not belong on it
    else:
        from agent.status.live import from_daemon

        overlay = from_daemon(args.config, args.root_dir)
    items = []
    if os.path.isdir(os.path.join(sysfs_root, "bus", "pci", "devices")):
        from agent.devices.sysfs import read_inventory

        items = device_items(read_inventory(sysfs_root), load_pci_names())
    live = os.path.abspath(sysfs_root) == "/sys"
    title = f"Machine {os.uname().nodename}" if live else f"Machine ({os.path.dirname(os.path.abspath(sysfs_root))})"
    root = build(topo, items, overlay, title)
    # where the colours come from (the running daemon, or its files), then what is missing
    note = "; ".join(filter(None, (f"hwagent state: {overlay.source}" if overlay.source else "", *overlay.notes)))
    svg = render_svg(root, overlay, Scale.for_cpus(len(topo.cpus)), note=note)
    if args.format == "svg":
        return svg
    try:
        return render_png(svg)
    except PngUnavailable as e:
        raise CommandError(str(e)) from None
