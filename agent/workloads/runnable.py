"""Can this node start a container as admitted: its working directory and its command (pure, over lookup callables).

A pod whose ``workingDir`` is missing or whose command does not exist would be
admitted, get its CPUs and devices, and fail seconds later as a StartError,
far from the command that caused it. Admission asks this first, while nothing
is allocated, and refuses with the reason (when a runtime runs pods here; the
kubelet's pods start elsewhere). The command is looked up as the shim's
``execvp`` will: a name with a slash relative to the working directory, a bare
name along the container's ``PATH`` (its env, else ``DEFAULT_PATH``).

The lookups answer an errno (0: found), and admission runs them as the user the
pod runs as (``agent.workloads.asuser``): a path behind a directory the user
cannot search is "Permission denied" whether or not it exists, as the user's
own ``cd`` says, never "does not exist" (which would tell what is there).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable

from agent.contracts.pods import DEFAULT_PATH, ContainerSpec, PodSpec

__all__ = ["DEFAULT_PATH", "unrunnable", "pod_unrunnable", "dir_error", "exec_error", "Lookup",
           "NOT_EXECUTABLE"]



#: a path -> 0 when it is what is wanted, else the errno the caller would get
Lookup = Callable[[str], int]


def dir_error(path: str) -> int:
    """0 when ``path`` is a directory the caller can enter; else ENOENT, EACCES, ENOTDIR, ...
    A directory the caller may stat but not search (``/root`` for a user) is EACCES, as ``cd``
    says: ``faccessat(X_OK)`` with the caller's effective, here filesystem, ids."""
    try:
        st = os.stat(path)
    except OSError as e:
        return e.errno or errno.ENOENT
    if not stat.S_ISDIR(st.st_mode):
        return errno.ENOTDIR
    return 0 if os.access(path, os.X_OK, effective_ids=True) else errno.EACCES


#: ``exec_error``'s answer for a path that is there but is no file the caller may execute
NOT_EXECUTABLE = errno.ENOEXEC


def exec_error(path: str) -> int:
    """0 when ``path`` is a regular file the caller may execute (``faccessat`` with the caller's
    effective, here filesystem, ids); NOT_EXECUTABLE when it is there but is not one; else the
    errno of reaching it (ENOENT, EACCES: a directory on the way the caller cannot search, ...)."""
    try:
        st = os.stat(path)
    except OSError as e:
        return e.errno or errno.ENOENT
    if not stat.S_ISREG(st.st_mode) or not os.access(path, os.X_OK, effective_ids=True):
        return NOT_EXECUTABLE
    return 0


def unrunnable(c: ContainerSpec, *, is_dir: Lookup = dir_error, is_exec: Lookup = exec_error) -> str | None:
    """Why container ``c`` cannot start on this node, or None. The message names the
    field and says what to do; a path the lookups could not reach (EACCES) is said so,
    never "does not exist"."""
    where = f"container {c.name}"
    wd = c.working_dir or "/"
    if c.working_dir:
        err = is_dir(c.working_dir)
        if err in (errno.ENOENT, errno.ENOTDIR):
            return (f"{where}: workingDir {c.working_dir} does not exist on this node (or is not a directory); "
                    "create it, or choose another (hwagent launch --workdir DIR)")
        if err:
            return (f"{where}: workingDir {c.working_dir}: {os.strerror(err)}; "
                    "choose one the pod's user can enter (hwagent launch --workdir DIR)")
    if not c.argv:
        return None  # the plan refuses a container without a command, with its own message
    cmd = c.argv[0]
    if "/" in cmd:
        path = os.path.normpath(os.path.join(wd, cmd))
        err = is_exec(path)
        if err not in (0, errno.ENOENT, errno.ENOTDIR, NOT_EXECUTABLE):
            return (f"{where}: command {cmd} ({path}): {os.strerror(err)}; "
                    "give one the pod's user can reach (a relative one is taken from workingDir)")
        if err:
            return (f"{where}: command {cmd} ({path}) does not exist or is not executable; "
                    "check the path (a relative one is taken from workingDir)")
        return None
    search = next((e.value for e in reversed(c.env) if e.name == "PATH"), DEFAULT_PATH)
    for d in search.split(":"):
        if not is_exec(os.path.join(wd, d or ".", cmd)):
            return None
    return f"{where}: command {cmd!r} is not found along PATH {search}; give its full path, or set PATH in env"


def pod_unrunnable(spec: PodSpec, **kw: Lookup) -> str | None:
    """The first container of ``spec`` (init containers first) that cannot start, and why."""
    for c in spec.all_containers():
        why = unrunnable(c, **kw)
        if why is not None:
            return why
    return None
