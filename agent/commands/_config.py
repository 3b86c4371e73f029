"""The config a command was pointed at, and the root dir it names.

Every command that reads the config takes ``--config`` (none: the embedded
defaults) and reports a bad file as its one-line error; those that find the
daemon's files take ``--root-dir`` over the config's, relative to where the
operator stands.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from agent.daemonconfig import DAEMON_SECTION
from agent.cli import CommandError
from agent.config import Config, ConfigError, load

__all__ = ["load_config", "root_dir"]


def load_config(args: argparse.Namespace) -> Config:
    """``--config`` (or the defaults); a file that does not load is a ``CommandError``."""
    try:
        return load(getattr(args, "config", None))
    except ConfigError as e:
        raise CommandError(str(e)) from None


def root_dir(args: argparse.Namespace, config: Config) -> Path:
    """``--root-dir`` made absolute, else the config's ``[daemon] root_dir``."""
    return Path(os.path.abspath(args.root_dir)) if args.root_dir else Path(config[DAEMON_SECTION].root_dir)
