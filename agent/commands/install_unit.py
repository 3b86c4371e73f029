"""`hwagent install-unit`: the systemd unit and a config file for this installation.

A unit is only right for the installation that writes it: ExecStart must name
the console script of the interpreter that has hwagent installed (a venv, or
/usr/local), never a path into somebody's checkout. The template is the unit the
project ships (``systemd/hwagent.service``, installed with the wheel); this
command rewrites its ExecStart and, when that path lies under /home or /root,
relaxes ProtectHome= so systemd can see the binary at all.

The config file gets every setting commented out at its default, so the file
documents itself and an untouched file behaves exactly like no file.

It also creates the system group of ``[workloads] socket_group`` (``hwagent``)
when missing: the daemon gives that group the admission socket, and keeps the
socket root-only while the group does not exist.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from agent.cli import CommandError

__all__ = ["add_parser", "render_unit", "commented_defaults", "entry_point"]

UNIT_NAME = "hwagent.service"
DEFAULT_UNIT_DIR = "/etc/systemd/system"
DEFAULT_CONFIG = "/etc/hwagent/config.toml"
_EXEC_START = re.compile(r"^ExecStart=\S+ run\b.*$", re.M)
_PROTECT_HOME = re.compile(r"^ProtectHome=.*$", re.M)
_PRIVATE_TMP = re.compile(r"^PrivateTmp=.*$", re.M)
#: present while systemd runs the machine (sd_booted's test): daemon-reload only then
SYSTEMD_RUN_DIR = Path("/run/systemd/system")


def entry_point() -> Path:
    """The ``hwagent`` console script of the interpreter running now."""
    candidate = Path(sys.executable).parent / "hwagent"
    if candidate.exists():
        return candidate
    found = shutil.which("hwagent")
    if found is None:
        raise CommandError(f"no hwagent console script beside {sys.executable} or on PATH; is hwagent installed?")
    return Path(found).resolve()


def render_unit(template: str, exe: Path, config_path: str) -> str:
    """The shipped unit with ExecStart (and, if it must, ProtectHome) fitted to ``exe``."""
    if not _EXEC_START.search(template):
        raise CommandError("the unit template has no 'ExecStart=... run' line")
    exec_start = f"ExecStart={exe} run --config {config_path} $HWAGENT_ARGS"
    text = _EXEC_START.sub(lambda _m: exec_start, template, count=1)
    if any(exe.is_relative_to(p) for p in (Path("/tmp"), Path("/var/tmp"))):
        # PrivateTmp=yes gives the service an empty /tmp: ExecStart would not exist
        text = _PRIVATE_TMP.sub(
            "# hwagent is installed under a temporary directory: the service must see it\nPrivateTmp=no",
            text,
            count=1,
        )
    if any(exe.is_relative_to(p) for p in (Path("/home"), Path("/root"), Path("/run/user"))):
        # ProtectHome=yes makes these paths invisible to the service: ExecStart would not exist
        text = _PROTECT_HOME.sub(
            "# hwagent is installed under a home directory: it must stay visible to the service\n"
            "ProtectHome=read-only",
            text,
            count=1,
        )
    return text


def commented_defaults() -> str:
    """Every setting at its default, commented out, under its section header."""
    from agent import __version__
    from agent.config import dumps, section_defaults

    lines = [
        f"# hwagent {__version__} configuration. Every setting is shown at its default,",
        "# commented out; uncomment and change what this node needs (docs/config.md).",
        "# `hwagent run --config THIS_FILE --print-config` shows the effective result.",
        "",
    ]
    for line in dumps(section_defaults()).splitlines():
        if not line or line.startswith("["):
            lines.append(line)
        elif line.startswith("#"):
            lines.append(line)
        else:
            lines.append(f"# {line}")
    return "\n".join(lines) + "\n"


def _write(path: Path, text: str, mode: int, force: bool) -> str:
    if path.exists() and not force:
        if path.read_text() == text:
            return f"unchanged {path}"
        return f"kept {path} (exists; --force replaces it)"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return f"wrote {path}"


def socket_group(arg: str | None, config_path: Path) -> str:
    """The group to create: --group, else the existing config file's
    ``[workloads] socket_group``, else that setting's default."""
    from agent.workloads.config import WORKLOADS_SECTION, WorkloadsConfig

    if arg is not None:
        return arg
    if not config_path.exists():
        return WorkloadsConfig().socket_group
    from agent.config import ConfigError, load

    try:
        return load(config_path)[WORKLOADS_SECTION].socket_group
    except ConfigError as e:
        raise CommandError(f"cannot read [workloads] socket_group: {e}; fix the file or pass --group NAME") from None


def run(args: argparse.Namespace) -> int:
    from agent.commands._sysgroup import ensure_group
    from agent.datafiles import unit_template

    template_path = Path(args.template) if args.template else unit_template()
    try:
        template = template_path.read_text()
    except OSError as e:
        raise CommandError(f"cannot read the unit template {template_path}: {e.strerror}") from None
    exe = Path(args.exe) if args.exe else entry_point()
    unit = render_unit(template, exe, args.config)
    dest = Path(args.dest or "/")
    unit_path = dest / args.unit_dir.lstrip("/") / UNIT_NAME
    config_path = dest / args.config.lstrip("/")
    group = socket_group(args.group, config_path)
    if args.dry_run:
        sys.stdout.write(unit)  # stdout stays the unit alone; what would change goes to stderr
        print(ensure_group(group, dry_run=True)[1], file=sys.stderr)
        return 0
    # the group first: a groupadd that fails stops here, before any file is written
    print(ensure_group(group, elsewhere=args.dest is not None)[1])
    print(_write(unit_path, unit, 0o644, force=True))
    print(_write(config_path, commented_defaults(), 0o640, force=args.force))
    if args.dest is None and shutil.which("systemctl") and SYSTEMD_RUN_DIR.is_dir():
        subprocess.run(["systemctl", "daemon-reload"], check=False)
        print("ran systemctl daemon-reload; start with: systemctl enable --now hwagent")
    else:
        print("start with: systemctl daemon-reload && systemctl enable --now hwagent")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "install-unit",
        help="write the systemd unit and /etc/hwagent/config.toml for this installation",
        description="Write hwagent.service (ExecStart pointing at this installation's hwagent) "
        "and a config file with every default commented out, and create the system group that "
        "may use the admission socket when it is missing (groupadd --system). The config file is "
        "kept if it exists (unless --force); the unit is always rewritten.",
    )
    p.add_argument("--dest", metavar="DIR", help="write under DIR instead of / (packaging, tests)")
    p.add_argument("--unit-dir", default=DEFAULT_UNIT_DIR, metavar="DIR", help=f"default {DEFAULT_UNIT_DIR}")
    p.add_argument("--config", default=DEFAULT_CONFIG, metavar="FILE", help=f"config path the unit uses (default {DEFAULT_CONFIG})")
    p.add_argument("--exe", metavar="PATH", help="hwagent executable for ExecStart (default: this installation's)")
    p.add_argument("--template", metavar="FILE", help="unit template (default: the shipped systemd/hwagent.service)")
    p.add_argument("--group", metavar="NAME",
                   help="the admission socket's group to create when missing (default: [workloads] socket_group "
                   "of the existing config file, else hwagent; '' creates none: the socket stays root only)")
    p.add_argument("--force", action="store_true", help="replace an existing config file")
    p.add_argument("--dry-run", action="store_true",
                   help="print the unit instead of writing anything (and say on stderr whether the group would be created)")
    p.set_defaults(func=run)
