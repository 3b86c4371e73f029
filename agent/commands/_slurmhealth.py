"""`hwagent slurm health`: the node's problems as a Slurm ``HealthCheckProgram`` reports them.

Asks the running daemon (its root-only status socket, the ``health`` view) for the node's
problems (agent.slurm.health: unhealthy devices hwagent offers, unhealthy components),
prints one line per problem (``hwagent: <subject> <why>``) and exits 1; healthy is
silence and 0, as LBNL NHC does. No daemon answering is a clear one-line error and exit
5 (``EXIT_NO_DAEMON``): the check cannot vouch for the devices, and it drains nothing.

``--drain`` also brings Slurm in line with the same decision the daemon's drain takes
(agent.slurm.drain.decide, the same reason text): drain for the problems, resume only
hwagent's own drain. It is for sites whose daemon runs with ``[slurm] drain = false``
and leave draining to the health check, as NHC does; with the daemon's drain on it
changes nothing (the same decision finds the node as it wants it).
"""

from __future__ import annotations

import argparse
import sys

from agent.cli import CommandError

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    h = sub.add_parser(
        "health",
        help="the node's problems as Slurm's HealthCheckProgram reports them (exit 1 and one line each)",
        description="Ask the running daemon for the node's problems (unhealthy devices hwagent offers, unhealthy "
                    "hwagent components): one line per problem and exit 1, nothing and exit 0 when healthy, "
                    "exit 5 when no daemon answers. Usable as slurm.conf's HealthCheckProgram.",
    )
    h.add_argument("--config", metavar="FILE", help="TOML config ([daemon] root_dir, [slurm] keys for --drain)")
    h.add_argument("--root-dir", metavar="DIR", help="hwagent's root dir (overrides the config)")
    h.add_argument("--drain", action="store_true",
                   help="also drain the node through scontrol for the problems, and resume hwagent's own drain "
                        "when there are none (the daemon's decision; never an administrator's drain)")
    h.set_defaults(func=run_health)


def _drain(args: argparse.Namespace, problems: tuple) -> str:
    """Carry out the drain decision for ``problems``; "" or the error in one line."""
    from agent.commands._config import load_config
    from agent.slurm.drain import Action, decide
    from agent.slurm.drainer import DrainSettings
    from agent.slurm.scontrol import Scontrol, ScontrolError

    settings = DrainSettings.from_config(load_config(args))
    scontrol = Scontrol(settings.bin_dir, settings.slurm_conf, settings.timeout_s)
    try:
        decision = decide(scontrol.show_node(settings.node_name), problems)
        if decision.action is Action.DRAIN:
            scontrol.drain(settings.node_name, decision.reason)
        elif decision.action is Action.RESUME:
            scontrol.resume(settings.node_name)
    except ScontrolError as e:
        return str(e)
    return ""


def run_health(args: argparse.Namespace) -> int:
    from agent.commands._config import daemon_root_dir
    from agent.commands._exitcodes import EXIT_NO_DAEMON
    from agent.slurm.health import Problem, problem_line
    from agent.status.client import DaemonNotRunning, NotAllowed, StatusError, ask_view

    root = daemon_root_dir(args)
    try:
        view = ask_view(root, "health")
    except NotAllowed as e:
        raise CommandError(e.message("slurm health"), EXIT_NO_DAEMON) from None
    except DaemonNotRunning as e:
        raise CommandError(f"hwagent is not running with root dir {root}: {e}; no device health to report",
                           EXIT_NO_DAEMON) from None
    except StatusError as e:
        raise CommandError(f"slurm health: {e.code}: {e.message}", EXIT_NO_DAEMON) from None
    problems = tuple(Problem(p["subject"], p["why"]) for p in view["problems"])
    for p in problems:
        print(problem_line(p))
    status = 1 if problems else 0
    if args.drain:
        error = _drain(args, problems)
        if error:
            print(f"hwagent slurm health: drain: {error}", file=sys.stderr)
            status = 1
    return status
