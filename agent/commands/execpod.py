"""`hwagent exec NAME [-c CONTAINER] -- CMD ARGS`: run a command inside a running container.

Like ``nomad alloc exec``: the command joins the container's cgroups (every
hierarchy, so it gets the container's CPUs, memory nodes, devices and limits and
is counted with it), enters the container's mount namespace when it has its own,
and runs as the pod's user, with this terminal's stdin, stdout and stderr; its
exit status is the command's. The daemon is only asked where the container is
(``describe``'s answer, with its ownership rule: a non-root caller finds only its
own pods); the CLI then moves itself and execs the command, so no stream passes
through the daemon. Joining a cgroup writes ``cgroup.procs``, which takes root.
"""

from __future__ import annotations

import argparse
import ctypes
import os
from dataclasses import dataclass
from typing import Any

from agent.cli import CommandError
from agent.commands._admission import add_common, call, pod_path
from agent.commands._exitcodes import EXIT_NOT_FOUND, EXIT_REFUSED, EXIT_USAGE

__all__ = ["ExecTarget", "exec_target", "add_parser", "run"]

_CLONE_NEWNS = 0x00020000


@dataclass(frozen=True)
class ExecTarget:
    container: str
    #: the container's cgroup directory in every hierarchy the pod has a directory in
    cgroups: tuple[str, ...]
    #: a live process of the container: its mount namespace is the one to enter
    pid: int
    #: (uid, gid, supplementary groups) the pod runs as; None: root
    user: tuple[int, int, tuple[int, ...]] | None


def exec_target(pod: dict[str, Any], container: str = "") -> ExecTarget:
    """Where to run, from ``describe``'s JSON of a pod (pure). ``container`` empty: the first
    app container. CommandError for a container the pod lacks or one that runs nothing."""
    names = [c["name"] for c in pod["containers"]]
    key = f"{pod['namespace']}/{pod['name']}"
    if container and container not in names:
        raise CommandError(f"pod {key} has no container {container!r} (its containers: {', '.join(names)})",
                           EXIT_NOT_FOUND)
    apps = [c for c in pod["containers"] if c["kind"] != "init"] or pod["containers"]
    c = next(c for c in pod["containers"] if c["name"] == container) if container else apps[0]
    if not c.get("pids") or not c.get("cgroup") or not pod.get("cgroup"):
        raise CommandError(f"container {c['name']} of pod {key} runs nothing now (phase {pod['phase']}); "
                           "`hwagent describe` shows its state", EXIT_REFUSED)
    below = c["cgroup"][len(pod["cgroup"]):]  # "/main": the container's dir under the pod's, everywhere
    run_as = ((pod.get("record") or {}).get("pod") or {}).get("spec", {}).get("run_as")
    user = None if not run_as else (int(run_as["uid"]), int(run_as["gid"]), tuple(run_as.get("groups") or ()))
    return ExecTarget(c["name"], tuple(f"{d}{below}" for d in pod["cgroup_dirs"]),
                      int(c["pids"][0]), user)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("exec", help="run a command inside a running container",
                              description="Run CMD in a running container of pod NAME (the first app container, "
                              "or -c CONTAINER): it joins the container's cgroups (so its CPUs, memory nodes, "
                              "devices and limits), enters its mount namespace when it has its own and runs as "
                              "the pod's user, with this terminal's stdin/stdout/stderr and this environment; "
                              "the exit status is CMD's. Joining cgroups takes root (sudo); a non-root caller "
                              "finds only its own pods.")
    add_common(p)
    p.add_argument("name")
    p.add_argument("-c", "--container", default="", help="the container (default: the first app container)")
    p.add_argument("--namespace", default="default")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to run")
    p.set_defaults(func=run)


def _join(target: ExecTarget) -> None:
    """Move this process into each of the container's cgroups (through the cgroup layer)."""
    from agent.cgroups.tree import join

    try:
        join(target.cgroups, os.getpid())
    except PermissionError as e:
        raise CommandError(f"joining the container's cgroup ({e.filename}) takes root: "
                           "run it as `sudo hwagent exec ...`", EXIT_REFUSED) from None
    except FileNotFoundError as e:
        raise CommandError(f"container {target.container} ended while joining it ({e.filename} is gone)",
                           EXIT_REFUSED) from None


def _enter_mounts(pid: int) -> None:
    """Enter the mount namespace of ``pid`` if it is not this one (a container without its own
    shares the host's, and then nothing changes)."""
    theirs, mine = os.stat(f"/proc/{pid}/ns/mnt"), os.stat("/proc/self/ns/mnt")
    if (theirs.st_dev, theirs.st_ino) == (mine.st_dev, mine.st_ino):
        return
    fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, _CLONE_NEWNS) != 0:
            err = ctypes.get_errno()
            raise CommandError(f"cannot enter the mount namespace of pid {pid}: {os.strerror(err)}", EXIT_REFUSED)
    finally:
        os.close(fd)
    os.chdir("/")


def _become(user: tuple[int, int, tuple[int, ...]] | None) -> None:
    """Drop to the pod's user when root runs a command in another user's pod."""
    if user is None or os.geteuid() != 0 or user[0] == 0:
        return
    uid, gid, groups = user
    os.setgroups(list(groups))
    os.setgid(gid)
    os.setuid(uid)


def _argv(args: argparse.Namespace) -> list[str]:
    """The command, from what follows NAME: argparse's remainder also takes options written
    between NAME and ``--`` (``exec NAME -c C -- CMD``), so those are parsed here."""
    cmd = list(args.cmd)
    if "--" in cmd:
        i = cmd.index("--")
        head, cmd = cmd[:i], cmd[i + 1:]
        if head:
            p = argparse.ArgumentParser(prog="hwagent exec", add_help=False)
            p.add_argument("-c", "--container", default=args.container)
            p.add_argument("--namespace", default=args.namespace)
            extra, unknown = p.parse_known_args(head)
            if unknown:
                raise CommandError(f"unknown option(s) before --: {' '.join(unknown)}; "
                                   "usage: hwagent exec NAME [-c CONTAINER] -- CMD ARGS", EXIT_USAGE)
            args.container, args.namespace = extra.container, extra.namespace
    if not cmd:
        raise CommandError("the command to run is missing: hwagent exec NAME [-c CONTAINER] -- CMD ARGS", EXIT_USAGE)
    return cmd


def run(args: argparse.Namespace) -> int:
    argv = _argv(args)
    pod = call(args, "GET", pod_path(args.namespace, args.name), name=args.name, timeout=30)["pod"]
    target = exec_target(pod, args.container)
    _join(target)
    _enter_mounts(target.pid)
    _become(target.user)
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        raise CommandError(f"cannot run {argv[0]!r} in container {target.container}: {e.strerror}",
                           127 if isinstance(e, FileNotFoundError) else 126) from None
    return 0  # not reached: execvp replaced this process
