"""`hwagent run`: the daemon in the foreground (systemd runs it the same way).

Flags override the config file, and the file overrides the embedded defaults;
``--print-config`` shows the result of that merge without starting anything.
"""

from __future__ import annotations

import argparse
import os

from agent.daemonconfig import DAEMON_SECTION
from agent.cli import CommandError
from agent.config import Config, ConfigError, dumps, load
from agent.daemon.logs import LEVELS, setup_logging


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run",
        help="run the node agent daemon in the foreground",
        description="Run the hwagent daemon in the foreground until SIGTERM or SIGINT; SIGHUP reloads "
        "the config. Without --config the embedded defaults apply (see docs/config.md).",
    )
    p.add_argument("--config", metavar="FILE", help="TOML config file (default: embedded defaults)")
    p.add_argument("--root-dir", metavar="DIR", help="where every file and socket hwagent creates lives")
    p.add_argument("--lock-dir", metavar="DIR",
                   help="where daemons claim their cgroup subtrees and CPUs (the same for every daemon on the machine)")
    p.add_argument(
        "--metrics-address", metavar="HOST:PORT", help="address of /metrics and /healthz (port 0: any free port)"
    )
    p.add_argument("--log-level", choices=sorted(LEVELS, key=LEVELS.__getitem__), help="log verbosity")
    p.add_argument(
        "--mode", choices=("auto", "standalone", "kubelet"), help="kubelet or standalone (auto: detect kubelet.sock)"
    )
    p.add_argument(
        "--print-config", action="store_true", help="print the effective config as TOML and exit"
    )
    p.set_defaults(func=run)


def effective_config(args: argparse.Namespace) -> Config:
    """File (or defaults), then flags; every value is checked the same way whatever its source."""
    config = load(args.config)
    overrides = {}
    if args.root_dir is not None:
        # a relative --root-dir is relative to where the operator stands; the file needs absolute paths
        overrides["root_dir"] = os.path.abspath(args.root_dir)
    if args.lock_dir is not None:
        overrides["lock_dir"] = os.path.abspath(args.lock_dir)
    if args.metrics_address is not None:
        overrides["metrics_address"] = args.metrics_address
    if args.log_level is not None:
        overrides["log_level"] = args.log_level
    if args.mode is not None:
        overrides["mode"] = args.mode
    return config.replace("daemon", **overrides) if overrides else config


def run(args: argparse.Namespace) -> int:
    try:
        config = effective_config(args)
    except ConfigError as e:
        from agent.daemon.daemon import EXIT_CONFIG  # systemd's RestartPreventExitStatus: no restart loop

        raise CommandError(str(e), code=EXIT_CONFIG) from None
    if args.print_config:
        print(dumps(config), end="")
        return 0
    setup_logging(config[DAEMON_SECTION].log_level)

    # the CLI's other commands need none of this: keep `hwagent topology` quick to start
    import asyncio

    from agent.daemon.daemon import Daemon

    # SIGHUP re-reads the same file with the same flags on top
    return asyncio.run(Daemon(config, reload_config=lambda: effective_config(args)).run())
