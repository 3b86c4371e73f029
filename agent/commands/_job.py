"""What `hwagent launch` decides for a job on the caller's side (pure): its environment from
``--env``/``--env-file``, its command resolved against the caller's PATH and directory, and
the exit status ``--wait`` ends with.

The caller's directory and PATH are known only here: the daemon runs the job
from its own process, with the workload's environment. So ``./train.sh`` and a
bare ``train`` found on the caller's PATH become absolute paths before the
manifest leaves, as srun resolves them before the job starts; a command found
nowhere is refused before anything is allocated.
"""

from __future__ import annotations

import errno
import os
import stat

from agent.cli import CommandError
from agent.commands._exitcodes import EXIT_EVICTED, EXIT_LOST, EXIT_OOM, EXIT_REFUSED, EXIT_START_FAILED

#: typing is not imported at run time: it is ~3 ms of the CLI's start-up (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

__all__ = ["env_items", "env_file_items", "resolve_command", "outcome", "main_container"]


#: the characters of a variable name the daemon takes (agent.workloads.manifest's ``_ENV_NAME``, the API
#: server's rule), checked here without ``re`` (not imported on launch's path): the first, then the rest
_NAME_FIRST = frozenset("-._abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_NAME_REST = _NAME_FIRST | frozenset("0123456789")


def valid_env_name(name: str) -> bool:
    """Whether the daemon takes ``name`` as an environment variable's name (pure)."""
    return bool(name) and name[0] in _NAME_FIRST and all(c in _NAME_REST for c in name[1:])


def env_items(items: Iterable[str], environ: Mapping[str, str], where: str = "--env") -> list[tuple[str, str]]:
    """``K=V`` pairs; a bare ``K`` takes the caller's value (as docker run does), and is
    an error when the caller has none. A name the daemon would refuse is refused here, where
    ``where`` can say which flag (or file and line) it came from."""
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not key:
            raise CommandError(f"{where} takes NAME=VALUE (or NAME, for the caller's value), got {item!r}")
        if not valid_env_name(key):
            raise CommandError(f"{where} {key!r}: not a valid variable name (letters, digits, '_', '-' and '.', "
                               "not starting with a digit)")
        if not sep:
            if key not in environ:
                raise CommandError(f"{where} {key}: not set in your environment; give {key}=VALUE")
            value = environ[key]
        out.append((key, value))
    return out


def env_file_items(text: str, path: str, environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """An env file: one ``NAME=VALUE`` (or ``NAME``) a line, ``export NAME=VALUE`` too (a file a
    shell can source, docker compose's .env); blank lines and ``#`` lines are skipped. Values are
    taken as written (no quotes removed, no expansion), as docker's --env-file. An error names
    the file and the line (``--env-file FILE:3: ...``)."""
    out: list[tuple[str, str]] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r").lstrip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export") and line[6:7] in (" ", "\t"):
            line = line[7:].lstrip()
        out += env_items([line], environ, where=f"--env-file {path}:{n}:")
    return out


def resolve_command(cmd: str, search_path: str | None, cwd: str) -> str:
    """``cmd`` as an absolute path: one with a slash from ``cwd``, a bare name along the caller's
    PATH. Raises CommandError (exit 1) when there is nothing executable there."""
    if "/" in cmd:
        path = os.path.normpath(os.path.join(cwd, cmd))
        try:
            regular = stat.S_ISREG(os.stat(path).st_mode)
        except OSError as e:
            # as the caller's shell says it: behind a directory it cannot search, "Permission denied"
            # whether or not the file is there
            what = " does not exist" if e.errno in (errno.ENOENT, errno.ENOTDIR) else f": {e.strerror}"
            raise CommandError(f"command {cmd} ({path}){what}; nothing was launched", EXIT_REFUSED) from None
        if not (regular and os.access(path, os.X_OK)):
            raise CommandError(f"command {cmd} ({path}) is not executable; nothing was launched", EXIT_REFUSED)
        return path
    found = _which(cmd, search_path if search_path is not None else os.defpath)
    if found is None:
        raise CommandError(f"command {cmd!r} is not found along your PATH; give its path "
                           f"(e.g. ./{cmd}); nothing was launched", EXIT_REFUSED)
    return os.path.normpath(os.path.join(cwd, found))


def _which(cmd: str, search_path: str) -> str | None:
    """The first executable file ``cmd`` along ``search_path``, as ``shutil.which`` finds it on POSIX
    (``shutil``, with ``bz2``, ``lzma`` and ``fnmatch``, is ~2 ms of a launch's start-up)."""
    seen = set()
    for d in search_path.split(os.pathsep):
        if d in seen:
            continue
        seen.add(d)
        name = os.path.join(d, cmd)
        if os.path.exists(name) and os.access(name, os.X_OK) and not os.path.isdir(name):
            return name
    return None


def main_container(pod: Mapping[str, Any], name: str | None = None) -> Mapping[str, Any] | None:
    """The container whose status is the job's: ``name``, else the first app container."""
    apps = [c for c in pod.get("containers") or [] if c.get("kind") != "init"]
    if name is not None:
        return next((c for c in apps if c.get("name") == name), None)
    return apps[0] if apps else None


def outcome(pod: Mapping[str, Any], name: str | None = None) -> tuple[int, str]:
    """The exit status of ``launch --wait`` for a pod that ended, and the line that explains a
    status the job did not give itself ("" when the job's own status says it)."""
    key = f"{pod.get('namespace')}/{pod.get('name')}"
    c = main_container(pod, name)
    reason, message = pod.get("reason") or "", pod.get("message") or ""
    if reason == "Evicted":
        return EXIT_EVICTED, f"{key} was evicted: {message or 'no reason given'}"
    if c is not None and c.get("reason") == "OOMKilled":
        return EXIT_OOM, f"{key}: container {c['name']} was OOMKilled ({c.get('message') or 'out of memory'})"
    if reason in ("StartError", "InitContainerFailed") or (c is not None and c.get("reason") == "StartError"):
        return EXIT_START_FAILED, f"{key} failed to start ({reason}): {message or (c or {}).get('message', '')}"
    if c is None or c.get("exit_code") is None:
        return EXIT_LOST, f"{key} ended ({reason or pod.get('phase')}) without its main container's exit status"
    code = int(c["exit_code"])
    return code, ""
