"""`hwagent doctor`: is this machine ready for the pressure probes, and if not, how to fix it."""

from __future__ import annotations

import argparse
import json
import os

from agent.doctor import run_checks
from agent.commands._format import add_format_option


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="check kernel config, BTF, tracefs, headers, bcc, cgroup mode, PSI and the kubelet's CPU manager",
        description="Check what the eBPF probes and pressure signals need; print each missing piece with its fix. "
        "Exit status 1 when an error-level check fails.",
    )
    add_format_option(p, ("text", "json"), json_alias=True)
    p.add_argument("--procfs-root", default="/proc", help=argparse.SUPPRESS)
    p.add_argument("--sysfs-root", default="/sys", help=argparse.SUPPRESS)
    p.add_argument("--modules-root", default="/lib/modules", help=argparse.SUPPRESS)
    p.add_argument("--boot-root", default="/boot", help=argparse.SUPPRESS)
    p.add_argument("--release", default=None, help=argparse.SUPPRESS)
    p.add_argument("--kubelet-root-dir", default="/var/lib/kubelet", metavar="DIR",
                   help="the kubelet's root dir, where its cpu_manager_state and config.yaml are read "
                   "(default /var/lib/kubelet): its CPU manager must be none on an NRI node")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    checks = run_checks(
        args.release or os.uname().release, args.procfs_root, args.sysfs_root, args.modules_root, args.boot_root,
        kubelet_root=args.kubelet_root_dir,
    )
    failed = [c for c in checks if not c.ok and c.severity == "error"]
    if args.format == "json":
        print(json.dumps([c.__dict__ for c in checks], indent=2))
    else:
        for c in checks:
            mark = "ok  " if c.ok else {"error": "FAIL", "warn": "WARN"}.get(c.severity, "info")
            print(f"[{mark}] {c.name}: {c.detail}")
            if not c.ok and c.fix:
                print(f"       fix: {c.fix}")
        print(f"{len(checks) - len(failed)}/{len(checks)} checks passed without error"
              + (f"; {len(failed)} must be fixed" if failed else ""))
    return 1 if failed else 0
