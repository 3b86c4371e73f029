"""The config a command was pointed at, and the root dir it names.

Every command that reads the config takes ``--config`` and reports a bad file
as its one-line error; those that find the daemon's files take ``--root-dir``
over the config's, relative to where the operator stands. Without ``--config``
the daemon is the owner of its config: the running daemon's claim (in the
machine-wide lock dir, ``$HWAGENT_LOCK_DIR`` or ``/run/hwagent/locks``;
agent.daemon.running) names the file it was started with and the root dir it
runs on, and a command uses those; with no daemon running, the embedded defaults. The commands that only talk to the daemon need nothing of the
config but ``[daemon] root_dir``: ``daemon_root`` reads just that, without the
config loader and every section's module behind it (bench/cli.py measured a
full load at about 49 ms of a `hwagent ps`).
"""

from __future__ import annotations

import os

from agent.cli import CommandError

#: typing is not imported at run time: it is ~3 ms of the CLI's start-up (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from agent.config import Config
    from agent.daemon.running import Running

__all__ = ["load_config", "root_dir", "daemon_root", "running_daemon", "LOCK_DIR_ENV"]

#: where the CLI looks for the running daemons' claims when the daemons use another [daemon] lock_dir
LOCK_DIR_ENV = "HWAGENT_LOCK_DIR"


def running_daemon(args: argparse.Namespace) -> Running | None:
    """The daemon this command talks to when no ``--config`` names one (agent.daemon.running): the one
    on ``--root-dir`` if given, else the one on the default root dir, else the only one. Asked once."""
    if getattr(args, "config", None):
        return None
    if not hasattr(args, "_running"):
        from agent.daemon.running import Ambiguous, choose, running
        from agent.rootpaths import DEFAULT_LOCK_DIR, DEFAULT_ROOT_DIR

        given = getattr(args, "root_dir", None)
        try:
            args._running = choose(running(os.environ.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR), DEFAULT_ROOT_DIR,
                                   os.path.abspath(given) if given else None)
        except Ambiguous as e:
            raise CommandError(str(e)) from None
    found: Running | None = args._running
    return found


def load_config(args: argparse.Namespace) -> Config:
    """``--config``, else the running daemon's config file, else the defaults; a file that does not
    load is a ``CommandError``."""
    from agent.config import ConfigError, load

    path = getattr(args, "config", None)
    daemon = running_daemon(args) if path is None else None
    if daemon is not None and daemon.config:
        path = daemon.config
    try:
        return load(path)
    except ConfigError as e:
        whose = (f" (the config of the daemon running on {daemon.root_dir}, pid {daemon.pid}: read it as "
                 "root, or give --config FILE)") if daemon is not None and path else ""
        raise CommandError(f"{e}{whose}") from None


def root_dir(args: argparse.Namespace, config: Config) -> Path:
    """``--root-dir`` made absolute, else the running daemon's (without ``--config``), else the config's
    ``[daemon] root_dir``."""
    from pathlib import Path

    from agent.daemonconfig import DAEMON_SECTION

    if args.root_dir:
        return Path(os.path.abspath(args.root_dir))
    daemon = running_daemon(args)
    return Path(daemon.root_dir) if daemon is not None else Path(config[DAEMON_SECTION].root_dir)


def daemon_root(args: argparse.Namespace) -> Path:
    """``daemon_root_dir`` as a Path."""
    from pathlib import Path

    return Path(daemon_root_dir(args))


def daemon_root_dir(args: argparse.Namespace) -> str:
    """``--root-dir`` made absolute, else ``[daemon] root_dir`` of ``--config``, else the running
    daemon's root dir (else the default), read alone: the other sections are the daemon's to check,
    not a client's."""
    from agent.rootpaths import DEFAULT_ROOT_DIR

    if getattr(args, "root_dir", None):
        return os.path.abspath(args.root_dir)
    path = getattr(args, "config", None)
    if path is None:
        daemon = running_daemon(args)
        return str(daemon.root_dir) if daemon is not None else DEFAULT_ROOT_DIR
    import tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise CommandError(f"cannot read config {path}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise CommandError(f"{path}: not valid TOML: {e}") from None
    daemon = data.get("daemon", {})
    value = daemon.get("root_dir", DEFAULT_ROOT_DIR) if isinstance(daemon, dict) else None
    if not isinstance(value, str) or not value:
        raise CommandError(f"{path}: daemon.root_dir must be a non-empty string (a directory), got {value!r}")
    return value
