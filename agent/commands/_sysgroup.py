"""The system group that may use the admission socket: found, or created with groupadd.

``install-unit`` calls this so that ``[workloads] socket_group`` names a group
that exists: without it the daemon keeps the socket root-only, and a user
added to a group that was never created gets no access and no hint why.
"""

from __future__ import annotations

import grp
import shutil
import subprocess
from typing import Literal

from agent.cli import CommandError

__all__ = ["GroupAction", "group_action", "ensure_group"]

GroupAction = Literal["none", "exists", "create", "would-create", "elsewhere"]


def group_action(name: str, exists: bool, dry_run: bool, elsewhere: bool) -> GroupAction:
    """What to do about the group: nothing when unset or present; report only when
    nothing may change here (a dry run, or files written for another root)."""
    if not name:
        return "none"
    if exists:
        return "exists"
    if dry_run:
        return "would-create"
    if elsewhere:
        return "elsewhere"
    return "create"


def _exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def ensure_group(name: str, dry_run: bool = False, elsewhere: bool = False) -> tuple[GroupAction, str]:
    """Create the system group ``name`` when missing; returns what was done and the line to print.

    A failed groupadd raises CommandError and has created nothing."""
    action = group_action(name, _exists(name) if name else False, dry_run, elsewhere)
    how = f"groupadd --system {name}"
    member = f"add users who may run jobs with: usermod -a -G {name} USER"
    if action == "none":
        return action, "no socket group: the admission socket is root only"
    if action == "exists":
        return action, f"group {name} exists; {member}"
    if action == "would-create":
        return action, f"would create system group {name} ({how})"
    if action == "elsewhere":
        return action, f"group {name} not created (files written under --dest): run `{how}` on the target"
    exe = shutil.which("groupadd")
    if exe is None:
        raise CommandError("groupadd not found: install Debian's passwd package, or pass --group '' for a root-only socket")
    done = subprocess.run([exe, "--system", name], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        why = done.stderr.strip() or f"exit status {done.returncode}"
        raise CommandError(f"cannot create group {name}: {why} (run install-unit as root, or pass --group '')")
    return action, f"created system group {name}; {member}"
