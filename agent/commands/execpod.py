"""`hwagent exec NAME [-c CONTAINER] -- CMD ARGS`: run a command inside a running container.

Like ``docker exec`` and ``nomad alloc exec``: the command joins the container's
cgroups (every hierarchy, so it gets the container's CPUs, memory nodes, devices
and limits and is counted with it), enters the container's mount namespace when
it has its own, and runs as the pod's user, in the container's working directory
and with the container's environment (its main process's, as the runtime built it:
the pod's env, the device grants', HOME/USER of its user), ``-e K=V`` on top. The
command runs in a child, in a session of its own: its stdin, stdout and stderr are
pipes this process relays to and from this terminal (agent.commands._piperelay), or
with ``-t`` a pty of its own relayed in raw mode (agent.commands._ptyrelay); no
process of the pod ever holds a descriptor of the caller's terminal, which a pod's
user could otherwise push input into (TIOCSTI) for root's shell to run (issue 32).
Its exit status is the command's. The container's environment is read here as
root but is only data: it is the command's ``execve`` argument, after the drop to
the pod's user, never this process's environment. The daemon is only asked where
the container is (``describe``'s answer, with its ownership rule: a non-root caller
finds only its own pods); the child then moves itself and execs the command, so no
stream passes through the daemon. Joining a cgroup writes ``cgroup.procs``, which
takes root.
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

__all__ = ["ExecTarget", "exec_target", "parse_environ", "container_env", "tty_environ", "add_parser", "run"]

_CLONE_NEWNS = 0x00020000


@dataclass(frozen=True)
class ExecTarget:
    container: str
    #: the container's cgroup directory in every hierarchy the pod has a directory in
    cgroups: tuple[str, ...]
    #: the container's main process: its mount namespace is the one to enter, its environment the one to run with
    pid: int
    #: (uid, gid, supplementary groups) the pod runs as; None: root
    user: tuple[int, int, tuple[int, ...]] | None
    #: the container's working directory (its spec's workingDir, "/" without one)
    workdir: str = "/"


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
    spec = ((pod.get("record") or {}).get("pod") or {}).get("spec", {})
    run_as = spec.get("run_as")
    user = None if not run_as else (int(run_as["uid"]), int(run_as["gid"]), tuple(run_as.get("groups") or ()))
    specs = [s for s in (spec.get("containers") or []) + (spec.get("init_containers") or []) if s["name"] == c["name"]]
    workdir = (specs[0].get("working_dir") if specs else None) or "/"
    return ExecTarget(c["name"], tuple(f"{d}{below}" for d in pod["cgroup_dirs"]),
                      int(c.get("pid") or c["pids"][0]), user, workdir)


def parse_environ(data: bytes) -> dict[str, str]:
    """``/proc/PID/environ``'s NUL-separated ``K=V`` entries (pure); an entry without ``=`` is skipped."""
    out: dict[str, str] = {}
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key:
            out[os.fsdecode(key)] = os.fsdecode(value)
    return out


def container_env(pid: int, overrides: list[tuple[str, str]]) -> dict[str, str]:
    """The environment the container's main process started with (the runtime's plan: docker exec's
    "the container's environment"), ``-e`` on top. Read here, as root, before dropping to its user."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = parse_environ(f.read())
    except FileNotFoundError:
        raise CommandError(f"the container's process {pid} ended; `hwagent describe` shows its state",
                           EXIT_REFUSED) from None
    except PermissionError:
        raise CommandError(f"reading the container's environment (/proc/{pid}/environ) takes root: "
                           "run it as `sudo hwagent exec ...`", EXIT_REFUSED) from None
    env.update(overrides)
    return env


def tty_environ(env: dict[str, str], caller: dict[str, str] | os._Environ[str], overrides: list[tuple[str, str]]) -> dict[str, str]:
    """The command's environment under ``-t`` (pure): the caller's TERM over the container's, as
    docker exec -t passes it (the pty is drawn on the caller's terminal, whatever the container
    was started with); ``-e TERM=...`` still wins, and without a TERM of the caller's nothing changes."""
    if "TERM" in caller and not any(k == "TERM" for k, _ in overrides):
        return {**env, "TERM": caller["TERM"]}
    return env


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("exec", help="run a command inside a running container",
                              description="Run CMD in a running container of pod NAME (the first app container, "
                              "or -c CONTAINER): it joins the container's cgroups (so its CPUs, memory nodes, "
                              "devices and limits), enters its mount namespace when it has its own and runs as "
                              "the pod's user, in the container's working directory with the container's "
                              "environment (-e on top), in a session of its own with its stdin/stdout/stderr "
                              "relayed to and from this terminal through pipes (-t: a terminal of its own), "
                              "so the pod never holds this terminal; the exit status is CMD's. Joining cgroups takes root "
                              "(sudo); a non-root caller finds only its own pods.",
                              epilog="Without -t, CMD has no terminal: it runs in a session of its own with pipes, "
                              "which this process (staying outside the pod) relays. Ctrl-C, Ctrl-\\, a hangup and "
                              "SIGTERM are passed on to CMD's process group; what is typed here goes to CMD's "
                              "stdin while exec is in the foreground, and the end of this stdin (Ctrl-D, the end "
                              "of a pipe or file) closes CMD's. exec ends when CMD does (what a child it left "
                              "running writes later is not shown); CMD killed by SIGINT, SIGTERM, SIGHUP or "
                              "SIGPIPE ends exec with the same signal. Programs that need a terminal (/dev/tty, "
                              "password prompts, line editing) need -t. Either way no process of the pod holds a "
                              "descriptor of this terminal, so it cannot push input into it (TIOCSTI), and the "
                              "container's environment is only CMD's, applied in its execve as the pod's user.")
    add_common(p)
    p.add_argument("name")
    p.add_argument("-c", "--container", default="", help="the container (default: the first app container)")
    p.add_argument("--namespace", default="default")
    p.add_argument("-i", "--interactive", action="store_true",
                   help="taken for docker's habit (-it): stdin is always passed on to CMD")
    p.add_argument("-t", "--tty", action="store_true",
                   help="give CMD a terminal of its own (a pty; this terminal in raw mode, its window size "
                   "followed, your TERM unless -e TERM=...), for shells and full-screen programs")
    p.add_argument("-e", "--env", metavar="NAME=VALUE", action="append", default=[],
                   help="set a variable over the container's environment (repeatable; NAME alone takes yours)")
    p.add_argument("-w", "--workdir", metavar="DIR", help="run in DIR (default: the container's working directory)")
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
            p.add_argument("-i", "--interactive", action="store_true")
            p.add_argument("-t", "--tty", action="store_true", default=args.tty)
            p.add_argument("-e", "--env", action="append", default=list(args.env))
            p.add_argument("-w", "--workdir", default=args.workdir)
            extra, unknown = p.parse_known_args(head)
            if unknown:
                raise CommandError(f"unknown option(s) before --: {' '.join(unknown)}; "
                                   "usage: hwagent exec NAME [-c CONTAINER] [-it] [-e K=V] -- CMD ARGS", EXIT_USAGE)
            args.container, args.namespace, args.tty = extra.container, extra.namespace, extra.tty
            args.env, args.workdir = extra.env, extra.workdir
    if not cmd:
        raise CommandError("the command to run is missing: hwagent exec NAME [-c CONTAINER] -- CMD ARGS", EXIT_USAGE)
    return cmd


def _chdir(workdir: str, target: ExecTarget) -> None:
    try:
        os.chdir(workdir)
    except OSError as e:
        raise CommandError(f"cannot enter the working directory {workdir} in container {target.container}: "
                           f"{e.strerror}", EXIT_REFUSED) from None


def run(args: argparse.Namespace) -> int:
    from agent.commands._job import env_items

    argv = _argv(args)
    overrides = env_items(args.env, os.environ, where="-e")
    pod = call(args, "GET", pod_path(args.namespace, args.name), name=args.name, timeout=30)["pod"]
    target = exec_target(pod, args.container)
    env = container_env(target.pid, overrides)
    workdir = args.workdir or target.workdir

    def setup() -> None:
        """In the process that execs: join, enter, drop to the pod's user, then its directory (as that user)."""
        _join(target)
        _enter_mounts(target.pid)
        _become(target.user)
        _chdir(workdir, target)

    # the command runs in a child; this process keeps the caller's terminal, outside the pod, and
    # relays: the pod gets a pty of its own (-t) or pipes, never a descriptor of the caller's terminal
    if args.tty:
        from agent.commands._ptyrelay import run_in_pty

        return run_in_pty(setup, argv, tty_environ(env, os.environ, overrides))
    from agent.commands._piperelay import run_with_pipes

    return run_with_pipes(setup, argv, env)
