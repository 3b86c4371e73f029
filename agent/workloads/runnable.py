"""Can this node start a container as admitted: its working directory and its command (pure, over stat callables).

A pod whose ``workingDir`` is missing or whose command does not exist would be
admitted, get its CPUs and devices, and fail seconds later as a StartError,
far from the command that caused it. Admission asks this first, while nothing
is allocated, and refuses with the reason (when a runtime runs pods here; the
kubelet's pods start elsewhere). The command is looked up as the shim's
``execvp`` will: a name with a slash relative to the working directory, a bare
name along the container's ``PATH`` (its env, else ``DEFAULT_PATH``).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from agent.contracts.pods import ContainerSpec, PodSpec

__all__ = ["DEFAULT_PATH", "unrunnable", "pod_unrunnable", "executable"]

#: the PATH a workload gets unless its env sets one (agent.runtime.plan's BASE_ENV)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def unrunnable(
    c: ContainerSpec, *, isdir: Callable[[str], bool] = os.path.isdir, is_exec: Callable[[str], bool] = executable
) -> str | None:
    """Why container ``c`` cannot start on this node, or None. The message names the
    field and says what to do."""
    where = f"container {c.name}"
    wd = c.working_dir or "/"
    if c.working_dir and not isdir(c.working_dir):
        return (f"{where}: workingDir {c.working_dir} does not exist on this node (or is not a directory); "
                "create it, or choose another (hwagent launch --workdir DIR)")
    if not c.argv:
        return None  # the plan refuses a container without a command, with its own message
    cmd = c.argv[0]
    if "/" in cmd:
        path = os.path.normpath(os.path.join(wd, cmd))
        if not is_exec(path):
            return (f"{where}: command {cmd} ({path}) does not exist or is not executable; "
                    "check the path (a relative one is taken from workingDir)")
        return None
    search = next((e.value for e in reversed(c.env) if e.name == "PATH"), DEFAULT_PATH)
    for d in search.split(":"):
        if is_exec(os.path.join(wd, d or ".", cmd)):
            return None
    return f"{where}: command {cmd!r} is not found along PATH {search}; give its full path, or set PATH in env"


def pod_unrunnable(spec: PodSpec, **kw: Callable[[str], bool]) -> str | None:
    """The first container of ``spec`` (init containers first) that cannot start, and why."""
    for c in spec.all_containers():
        why = unrunnable(c, **kw)
        if why is not None:
            return why
    return None
