"""`hwagent launch`: run a job (or a service) from flags or a manifest file, like srun or docker run.

``hwagent launch --name web --cpus 2 --qos dedicated --device example.com/gpu=1 -- cmd args``
builds the Pod manifest those flags mean (docs/admission.md) and sends it to the
daemon's admission API. A launch from flags runs once (``--restart never``, as
``docker run``), in the caller's directory, with the command resolved against
the caller's PATH; ``--wait`` follows it to its end, streams its output and
exits with its status (agent.commands._wait); ``--rm`` removes it afterwards.
A manifest (``-f``) keeps the Pod's own defaults (restartPolicy Always).
"""

from __future__ import annotations

import os
import sys

from agent.cli import CommandError
from agent.commands._admission import COMMON_FLAGS, EXIT_REFUSED, Session, container_line, dumps, format_pod_line, \
    pod_path
from agent.commands._flags import APPEND, SWITCH, Flag, add, parse
from agent.commands._jsonc import dumps as json_dumps

#: typing is not imported at run time: it is ~3 ms of the CLI's start-up (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from types import SimpleNamespace
    from typing import Any

QOS_LEVELS = {"shared": "shared_cores", "dedicated": "dedicated_cores", "reclaimed": "reclaimed_cores",
              "system": "system_cores"}
QOS_KEY = "katalyst.kubewharf.io/qos_level"
ENHANCEMENT_KEY = "katalyst.kubewharf.io/memory_enhancement"
#: page sizes with a --hugepages-<size> flag (any other size goes in a manifest)
HUGEPAGE_FLAGS = ("2Mi", "1Gi")
#: agent.contracts.memory.SPREAD_ANNOTATION, spelled out: importing the contracts package costs the
#: CLI its import budget (tests/unit/test_cli_imports.py); tests/unit/memory checks they agree
SPREAD_ANNOTATION = "hwagent.io/hugepages-spread"
#: agent.workloads.autoremove.REMOVE_ON_EXIT, spelled out for the same reason (asyncio and the registry
#: behind it); tests/integration/runtime/test_jobs.py checks the two agree
REMOVE_ON_EXIT = "hwagent.io/remove-on-exit"
#: --restart values -> the Pod's restartPolicy
RESTART = {"never": "Never", "on-failure": "OnFailure", "always": "Always"}
_NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"


def cpu_count(text: str) -> str:
    """``--cpus``: a positive CPU quantity as the API writes it, whole CPUs (``2``) or a fraction
    (``0.5``, ``1.25`` or ``500m``, as ``docker run --cpus`` and the kubelet take them), to the
    millicore; a ValueError (argparse's usage error) for anything else. Pure; no ``re``/``decimal``."""
    if not text.isascii():
        raise ValueError(text)
    milli = text.endswith("m")
    whole, dot, frac = (text[:-1] if milli else text).partition(".")
    if milli:
        valid = whole.isdigit() and not dot
    else:
        valid = (whole.isdigit() or (whole == "" and bool(dot))) and (not dot or frac.isdigit())
    if not valid:
        raise ValueError(text)
    if milli:
        m = int(whole)
    else:
        if len(frac) > 3 and frac[3:].strip("0"):
            raise ValueError(text)  # finer than a millicore
        m = int(whole or "0") * 1000 + int((frac + "000")[:3] or "0")
    if m <= 0:
        raise ValueError(text)
    return str(m // 1000) if m % 1000 == 0 else f"{m}m"


#: launch's flags, defined once: argparse is built from them (add_parser) and the plain reader reads
#: the usual argument lists with them (agent.commands._flags, fast_args)
FLAGS: tuple[Flag, ...] = (
    *COMMON_FLAGS,
    Flag("-f", "--file", metavar="FILE",
         help="a Pod manifest (YAML or JSON; - for stdin): a regular file of at most 1 MiB"),
    Flag("--name", help="pod name (DNS-1123 subdomain)"),
    Flag("--namespace", default="default"),
    Flag("--container", default="main", help="container name (default: main)"),
    Flag("--cpus", metavar="N", convert=cpu_count, group="cpu",
         help="CPUs, request = limit: whole (2) for dedicated, or a fraction as docker takes it (0.5 or 500m)"),
    Flag("--cpu-request", metavar="Q", group="cpu", help="a CPU request as a quantity (e.g. 500m), no limit"),
    Flag("--qos", choices=tuple(QOS_LEVELS), help="Katalyst QoS level (default: shared)"),
    Flag("--numa-binding", kind=SWITCH,
         help="bind the CPUs (and memory) to NUMA node(s); implied by --qos dedicated, "
         "which the CPU policy serves only NUMA-bound"),
    Flag("--memory", "-m", dest="memory", metavar="SIZE", help="memory limit (= request), e.g. 2Gi"),
    *(Flag(f"--hugepages-{size}", dest=f"hugepages_{size}", metavar="SIZE",
           help=f"{size} hugepages (limit = request), e.g. {'64Mi' if size == '2Mi' else '2Gi'}; "
                "placed on the pod's NUMA node(s) "
                "by the memory manager and limited in the hugetlb cgroup") for size in HUGEPAGE_FLAGS),
    Flag("--hugepages-spread", kind=SWITCH,
         help=f"spread the hugepages evenly over the NUMA nodes that have them ({SPREAD_ANNOTATION})"),
    Flag("--device", metavar="RESOURCE=COUNT", kind=APPEND, help="extended resource count (repeatable)"),
    Flag("--ignore-unknown-fields", kind=SWITCH,
         help="-f: warn about unknown manifest fields instead of refusing them"),
    Flag("--restart", choices=tuple(RESTART),
         help="restart policy (default: never, as docker run; a manifest keeps its own, Always "
         "unless it says)"),
    Flag("-e", "--env", metavar="NAME=VALUE", kind=APPEND,
         help="set an environment variable in the job (repeatable; NAME alone takes your value)"),
    Flag("--env-file", metavar="FILE", kind=APPEND,
         help="read NAME=VALUE (or export NAME=VALUE) lines from FILE, a regular file (# comments; repeatable; --env wins)"),
    Flag("-w", "--workdir", metavar="DIR",
         help="the job's working directory (default: your current directory, as srun); "
         "one the job's user cannot enter or that is missing is refused, as that user's cd would"),
    Flag("-d", "--detach", kind=SWITCH, group="wait",
         help="return once admitted (the default without --wait; docker run -d)"),
    Flag("--wait", kind=SWITCH, group="wait",
         help="wait for the pod to end, stream its main container's output (stdout and stderr, "
         "as its log has them) and exit with its exit status; Ctrl-C shows its state, a second "
         "Ctrl-C within 1 s stops it (exit statuses: docs/commands/README.md)"),
    Flag("-q", "--quiet", kind=SWITCH, help="--wait: do not stream the output"),
    Flag("--rm", kind=SWITCH,
         help="remove the pod once it ended: with --wait after its exit status is read, without "
         "--wait by the daemon when it ends (the CLI need not stay)"),
    Flag("--user", metavar="NAME|UID[:GID]",
         help="run as this user (root only; a caller other than root runs as itself)"),
    Flag("--format", choices=("text", "json"), default="text"),
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    import argparse

    p = subparsers.add_parser(
        "launch",
        help="run a job or a service from flags or a manifest file",
        description="Admit a pod through the running daemon: either from flags and the command after `--`, "
        "or from a Pod manifest (-f FILE, YAML or JSON). From flags it runs once (--restart never), in your "
        "current directory (--workdir), with the command found along your PATH or from your directory "
        "(./train.sh), and only the environment you give it (--env, --env-file). Without --wait it prints "
        "what each container got and returns; with --wait it follows the job like srun: streams its output, "
        "exits with its exit status (200 failed to start, 201 OOMKilled, 202 evicted, 203 lost), and "
        "Ctrl-C prints its state, a second Ctrl-C within 1 s stops it.",
    )
    add(p, FLAGS)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to run")
    p.set_defaults(func=run)


def fast_args(argv: Sequence[str]) -> SimpleNamespace | None:
    """``argv`` (after ``launch``) read without argparse, or None where argparse must read it (agent.cli)."""
    return parse(FLAGS, argv, rest="cmd", func=run)


def generated_name(command: str) -> str:
    """A pod name from the command, like ``systemd-run``'s unit names: ``stress-k3x9q``.

    Lower-cased, reduced to DNS-1123 label characters, with a random suffix so two
    launches of one command do not collide; ``--name`` picks a name instead.
    """
    base = _label(os.path.basename(command).lower()).strip("-")[:40] or "pod"
    # os.urandom, not secrets: secrets imports hmac and hashlib (~4 ms of a launch's start-up);
    # 256 % 36 skews a letter's odds by under 1 %, which a name's uniqueness does not mind
    suffix = "".join(_NAME_CHARS[b % len(_NAME_CHARS)] for b in os.urandom(5))
    return f"{base}-{suffix}"


def _label(text: str) -> str:
    """``text`` with each run of characters other than ``a-z``, ``0-9`` and ``-`` made one ``-``
    (``re.sub(r"[^a-z0-9-]+", "-", text)`` without importing re: ~1.5 ms of a launch's start-up with
    the enum and functools it brings)."""
    out: list[str] = []
    in_run = False
    for ch in text:
        if ch in _NAME_CHARS or ch == "-":
            out.append(ch)
            in_run = False
        elif not in_run:
            out.append("-")
            in_run = True
    return "".join(out)


def manifest_from_flags(args: argparse.Namespace, resolve: Callable[[str], str] = lambda c: c,
                        env: list[tuple[str, str]] | None = None, workdir: str | None = None) -> dict[str, Any]:
    """The Pod the flags mean. ``resolve``: the command's first word as the job will exec it
    (the caller's PATH and directory, ``_job.resolve_command``); ``env`` and ``workdir`` as
    ``job_environment`` computed them."""
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise CommandError("the command to run is missing: hwagent launch [--name N] [...] -- CMD ARGS")
    name = args.name or generated_name(cmd[0])
    cmd[0] = resolve(cmd[0])
    annotations: dict[str, str] = {}
    if args.qos:
        annotations[QOS_KEY] = QOS_LEVELS[args.qos]
    if args.numa_binding or args.qos == "dedicated":
        annotations[ENHANCEMENT_KEY] = json_dumps({"numa_binding": "true"})
    if getattr(args, "hugepages_spread", False):
        annotations[SPREAD_ANNOTATION] = "true"
    if getattr(args, "rm", False) and not getattr(args, "wait", False):
        annotations[REMOVE_ON_EXIT] = "true"  # the daemon removes it when it ends (no CLI waits for it)
    requests, limits = _resources(args)
    container: dict[str, Any] = {"name": args.container, "command": cmd}
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    if resources:
        container["resources"] = resources
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in dict(env).items()]
    if workdir:
        container["workingDir"] = workdir
    meta: dict[str, Any] = {"name": name, "namespace": args.namespace}
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": RESTART[args.restart or "never"],
                            **({"securityContext": user_security(args.user)} if getattr(args, "user", None) else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _resources(args: argparse.Namespace) -> tuple[dict[str, str], dict[str, str]]:
    """(requests, limits) from --cpus, --cpu-request, --memory, --hugepages-<size>, --device."""
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if args.cpus is not None:
        limits["cpu"] = requests["cpu"] = args.cpus
    if args.cpu_request is not None:
        requests["cpu"] = args.cpu_request
    if args.memory is not None:
        limits["memory"] = requests["memory"] = args.memory
    for size in HUGEPAGE_FLAGS:
        value = getattr(args, f"hugepages_{size}", None)
        if value is not None:
            limits[f"hugepages-{size}"] = requests[f"hugepages-{size}"] = value
    for item in args.device:
        resource, sep, count = item.partition("=")
        if not sep or not resource or not count.isdigit():
            raise CommandError(f"--device takes RESOURCE=COUNT (e.g. example.com/gpu=1), got {item!r}")
        limits[resource] = count
    return requests, limits


def user_security(spec: str, users: Callable[[str], tuple[int, int]] | None = None,
                  groups: Callable[[str], int] | None = None) -> dict[str, int]:
    """``--user NAME|UID[:GID]`` as the Pod's ``spec.securityContext``: a name is looked
    up here (the daemon runs on this machine), a number is taken as it is; the daemon
    decides whether the caller may ask it."""
    import grp
    import pwd

    def user_id(name: str) -> tuple[int, int]:
        pw = pwd.getpwnam(name)
        return pw.pw_uid, pw.pw_gid

    def group_id(name: str) -> int:
        return grp.getgrnam(name).gr_gid

    users, groups = users or user_id, groups or group_id
    who, sep, group = spec.partition(":")
    if not who or (sep and not group):
        raise CommandError(f"--user takes NAME|UID[:GID], got {spec!r}")
    out: dict[str, int] = {}
    try:
        out["runAsUser"] = int(who) if who.isdigit() else users(who)[0]
        if group:
            out["runAsGroup"] = int(group) if group.isdigit() else groups(group)
    except KeyError:
        raise CommandError(f"--user {spec}: no such user or group on this machine") from None
    return out


def job_environment(args: argparse.Namespace, cwd: str, environ: dict[str, str]) -> tuple[list[tuple[str, str]], str]:
    """(env, workdir) of a launch from flags: --env-file lines, then --env (later wins), and
    the working directory, absolute (default: ``cwd``)."""
    from agent.commands._job import env_file_items, env_items

    env: list[tuple[str, str]] = []
    for path in args.env_file:
        from agent.commands._readfile import read_capped
        from agent.limits import MAX_MANIFEST_BYTES  # (agent.limits: dataclasses; only when a file is read)

        # a FIFO, a device or a file past a manifest's size is refused, never waited on or read whole
        raw = read_capped(os.path.join(cwd, path), MAX_MANIFEST_BYTES, f"--env-file {path}")
        try:
            text = raw.decode()
        except UnicodeDecodeError as e:
            raise CommandError(f"--env-file {path}: not UTF-8 text (byte {e.start})") from None
        env += env_file_items(text, path, environ)
    env += env_items(args.env, environ)
    return env, os.path.normpath(os.path.join(cwd, args.workdir or "."))


def check_workdir(workdir: str) -> None:
    """The working directory as the caller's own ``cd`` finds it (the CLI runs as the caller):
    "Permission denied" for one behind a directory it cannot search, whether or not it is there.
    The daemon looks it up again as the pod's user (agent.workloads.runnable)."""
    import errno
    import stat

    try:
        err = 0 if stat.S_ISDIR(os.stat(workdir).st_mode) else errno.ENOTDIR
    except OSError as e:
        err = e.errno or errno.ENOENT
    if err in (errno.ENOENT, errno.ENOTDIR):
        raise CommandError(f"--workdir {workdir} does not exist (or is not a directory); nothing was launched",
                           EXIT_REFUSED)
    if err:
        raise CommandError(f"--workdir {workdir}: {os.strerror(err)}; nothing was launched", EXIT_REFUSED)


def read_manifest(path: str) -> bytes:
    """A manifest file (``-``: standard input), refused when it is no regular file or is over the
    daemon's limit (``agent.limits.MAX_MANIFEST_BYTES``), before anything is sent."""
    from agent.commands._readfile import read_capped
    from agent.limits import MAX_MANIFEST_BYTES

    return read_capped(path, MAX_MANIFEST_BYTES, f"the manifest {path}")


def run(args: argparse.Namespace) -> int:
    if args.quiet and not args.wait:
        raise CommandError("--quiet goes with --wait (hwagent launch --wait -q -- CMD)")
    if args.file:
        flags = [f for f in ("name", "cpus", "cpu_request", "qos", "memory", "restart", "workdir", "user",
                             *(f"hugepages_{size}" for size in HUGEPAGE_FLAGS))
                 if getattr(args, f) is not None]
        if flags or args.hugepages_spread or args.device or args.env or args.env_file or args.numa_binding or [c for c in args.cmd if c != "--"]:
            raise CommandError("-f FILE takes the whole pod from the file; drop the other pod flags")
        if args.rm and not args.wait:
            raise CommandError("-f FILE --rm needs --wait; for the daemon to remove the pod when it ends, give it "
                               'the annotation hwagent.io/remove-on-exit: "true" in the file')
        raw = read_manifest(args.file)
        main = pod_name = None
    else:
        from agent.commands._job import resolve_command

        cwd = os.getcwd()
        env, workdir = job_environment(args, cwd, dict(os.environ))
        if args.user is None:  # run as the caller: what it cannot enter is refused here, as its shell would
            check_workdir(workdir)
        manifest = manifest_from_flags(args, lambda c: resolve_command(c, os.environ.get("PATH"), cwd), env, workdir)
        raw = json_dumps(manifest).encode()
        main, pod_name = args.container, manifest["metadata"]["name"]
    query = {"ignore_unknown_fields": "1"} if args.ignore_unknown_fields else None
    with Session(args, pod_name) as session:
        offset = 0
        if args.wait and not args.quiet and main is not None and pod_name is not None:
            from agent.commands._wait import log_offset

            offset = log_offset(_log_path(args, args.namespace, pod_name, main))
        resp = session.request("POST", "/v1/pods", raw, query, timeout=120)
        for w in resp["warnings"]:
            print(f"warning: {w}", file=sys.stderr)
        if args.wait:
            return _wait(args, session, resp["pod"], main, offset)
    pod = resp["pod"]
    if args.format == "json":
        print(dumps(pod))
        return 0
    print(f"admitted {format_pod_line(pod)}")
    for c in pod["containers"]:
        print(container_line(c))
    return 0


def _log_path(args: argparse.Namespace, namespace: str, name: str, container: str) -> str:
    """The job's log file (agent.runtime.lognames: the runtime's own names, without pathlib)."""
    from agent.commands._config import daemon_root_dir
    from agent.runtime.lognames import log_path

    return log_path(daemon_root_dir(args), namespace, name, container)


def _wait(args: argparse.Namespace, session: Session, pod: dict[str, Any], main: str | None, offset: int) -> int:
    from agent.commands._wait import OutputLost, wait_for

    if main is None:  # a manifest: its first app container is the job's
        main = next((c["name"] for c in pod["containers"] if c["kind"] != "init"), None)
    ns, name = pod["namespace"], pod["name"]
    tail = None
    if not args.quiet and main is not None:
        from agent.commands._tail import Tail

        tail = Tail(_log_path(args, ns, name, main), offset)
    try:
        code, why, ended = wait_for(session, ns, name, pod["uid"], main, tail)
    except OutputLost as lost:
        # the output's reader went away (`| head`); the pod ended all the same: remove it as asked,
        # then end as a closed pipe ends a command (agent.cli: quietly)
        if args.rm:
            session.request("DELETE", pod_path(ns, name), timeout=600)
        raise lost.error from None
    if why:
        print(f"hwagent launch: {why}", file=sys.stderr)
    if args.format == "json" and ended:
        print(dumps(ended))
    if args.rm and ended:
        session.request("DELETE", pod_path(ns, name), timeout=600)
    return code
