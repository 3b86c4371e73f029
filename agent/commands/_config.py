"""The config a command was pointed at, and the root dir it names.

Every command that reads the config takes ``--config`` (none: the embedded
defaults) and reports a bad file as its one-line error; those that find the
daemon's files take ``--root-dir`` over the config's, relative to where the
operator stands. The commands that only talk to the daemon need nothing of the
config but ``[daemon] root_dir``: ``daemon_root`` reads just that, without the
config loader and every section's module behind it (bench/cli.py measured a
full load at about 49 ms of a `hwagent ps`).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from agent.cli import CommandError

if TYPE_CHECKING:
    from agent.config import Config

__all__ = ["load_config", "root_dir", "daemon_root"]


def load_config(args: argparse.Namespace) -> Config:
    """``--config`` (or the defaults); a file that does not load is a ``CommandError``."""
    from agent.config import ConfigError, load

    try:
        return load(getattr(args, "config", None))
    except ConfigError as e:
        raise CommandError(str(e)) from None


def root_dir(args: argparse.Namespace, config: Config) -> Path:
    """``--root-dir`` made absolute, else the config's ``[daemon] root_dir``."""
    from agent.daemonconfig import DAEMON_SECTION

    return Path(os.path.abspath(args.root_dir)) if args.root_dir else Path(config[DAEMON_SECTION].root_dir)


def daemon_root(args: argparse.Namespace) -> Path:
    """``--root-dir`` made absolute, else ``[daemon] root_dir`` of ``--config`` (else its default),
    read alone: the other sections are the daemon's to check, not a client's."""
    from agent.rootpaths import DEFAULT_ROOT_DIR

    if getattr(args, "root_dir", None):
        return Path(os.path.abspath(args.root_dir))
    path = getattr(args, "config", None)
    if path is None:
        return Path(DEFAULT_ROOT_DIR)
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
    return Path(value)
