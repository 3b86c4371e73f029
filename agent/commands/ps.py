"""`hwagent ps`: the admitted pods, their CPUs, devices and phase, and bad static manifests."""

from __future__ import annotations

import sys

from agent.cli import CommandError
from agent.commands._exitcodes import EXIT_REFUSED
from agent.commands._admission import COMMON_FLAGS, Session, _nodes, age
from agent.commands._flags import SWITCH, Flag, add, parse
from agent.commands._podstatus import status_word

#: typing is not imported at run time: it is ~3 ms of the CLI's start-up (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterator, Sequence
    from types import SimpleNamespace
    from typing import Any

#: pods asked for per request: the daemon builds a page in time proportional to it, and the
#: table is printed page by page, so neither side holds 10,000 pods at once (issue 24)
PAGE_SIZE = 1000
#: ps's flags, defined once for argparse and the plain reader (agent.commands._flags)
FLAGS = (*COMMON_FLAGS, Flag("--format", choices=("text", "json"), default="text"),
         Flag("-a", "--all", kind=SWITCH,
              help="taken for docker's habit: ps always lists every pod, ended ones too"),
         Flag("-q", "--quiet", kind=SWITCH,
              help="only the pod names, one a line (NAMESPACE/NAME outside default), as `hwagent rm $(hwagent ps "
              "-aq)` takes them"))
HEADER = ["NAMESPACE", "NAME", "QOS", "STATUS", "CONTAINER", "RESTARTS", "CPUS", "NUMA", "DEVICES", "AGE"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "ps",
        help="list admitted pods",
        description="List the pods the daemon admitted: QoS, status (as kubectl names it: Running, "
        "Completed, Error, OOMKilled, CrashLoopBackOff, StartError, Evicted ...), restarts, CPUs, NUMA nodes and "
        "devices per container, age, and static manifest files that are not admitted (with why); then the "
        "workloads another front names on this node (Slurm's job steps with [slurm] on: partition, job, step, "
        "user), root seeing every one, anyone else only their own.",
    )
    add(p, FLAGS)
    p.set_defaults(func=run)


def fast_args(argv: Sequence[str]) -> SimpleNamespace | None:
    """``argv`` (after ``ps``) read without argparse, or None where argparse must read it (agent.cli)."""
    return parse(FLAGS, argv, func=run)


def body_rows(pods: list[dict[str, Any]]) -> list[list[str]]:
    """One row per container; STATUS is the pod's word as kubectl prints it (CrashLoopBackOff,
    OOMKilled, StartError, Completed ..., agent.commands._podstatus), RESTARTS the container's."""
    out = []
    for pod in pods:
        status = status_word(pod)
        for i, c in enumerate(pod["containers"]):
            devs = ",".join(f"{d['resource']}={d['id']}" for d in c["devices"]) or "-"
            numa = "any" if c["numa_affinity"] is None else _nodes(c["numa_affinity"])
            first = i == 0
            out.append([
                pod["namespace"] if first else "", pod["name"] if first else "", pod["qos"] if first else "",
                status if first else "", c["name"], str(c["restart_count"]), _nodes(c["cpu_ids"]), numa, devs,
                age(pod["admitted_at"]) if first else "",
            ])
    return out


def pages(args: argparse.Namespace, page_size: int = PAGE_SIZE) -> Iterator[dict[str, Any]]:
    """The daemon's List, a page at a time (GET /v1/pods?limit=&continue=, one connection);
    a daemon that does not page answers every pod at once, with no continue token."""
    with Session(args) as session:
        yield from _walk(lambda query: session.request("GET", "/v1/pods", query=query, timeout=30), page_size)


def line_pages(args: argparse.Namespace, page_size: int = PAGE_SIZE) -> Iterator[tuple[dict[str, Any], bytes]]:
    """The daemon's List a page at a time as ``?lines=1`` answers it (agent.workloads.cliapi.list_lines):
    (the page's head: continue, count, manifest_errors; its pods' JSON joined by ",\n"), the pods
    neither decoded nor encoded here. A daemon from before ``lines`` answers the JSON page: its pods
    are encoded here as the daemon would have."""
    from agent.commands._jsonc import dumps as compact, loads

    def fetch(query: dict[str, str]) -> tuple[dict[str, Any], bytes]:
        raw = session.request_bytes("GET", "/v1/pods", query=query | {"lines": "1"}, timeout=30)
        first, _, pods = raw.partition(b"\n")
        try:
            head: dict[str, Any] = loads(first)
        except ValueError:
            raise CommandError("the daemon answered a page that is not JSON; check it with `hwagent status`",
                               EXIT_REFUSED) from None
        if "pods" in head:
            pods = ",\n".join([compact(p, sort_keys=True) for p in head.pop("pods")]).encode()
        return head, pods

    with Session(args) as session:
        yield from _walk(fetch, page_size)


def _walk(fetch: Callable[[dict[str, str]], Any], page_size: int) -> Iterator[Any]:
    """``fetch(query)`` for each page, following the continue tokens (a page is a dict, or (its head, ...))."""
    token = ""
    while True:
        page = fetch({"limit": str(page_size)} | ({"continue": token} if token else {}))
        yield page
        nxt = (page[0] if isinstance(page, tuple) else page).get("continue") or ""
        if not nxt:
            return
        if nxt == token:
            raise CommandError(f"the daemon answered the same page twice (continue={nxt!r}); "
                               "check it with `hwagent status`", EXIT_REFUSED)
        token = nxt


def print_json(args: argparse.Namespace) -> None:
    """``{"manifest_errors": [...], "pods": [`` then one pod a line, then ``]}`` (``], "directory": {...}}``
    where another front names workloads the caller may see: ``directory``): one JSON document, keys
    sorted, written a page at a time as the daemon encoded it (the first page carries the manifest
    errors). It was ``json.dumps(indent=2)`` of every pod gathered: 1.5 s of CPU at 5,000 pods on a
    256-CPU machine, a line per CPU id (issue 37 item 17)."""
    from agent.commands._jsonc import dumps as compact

    out = getattr(sys.stdout, "buffer", None)
    write = out.write if out is not None else (lambda b: sys.stdout.write(b.decode()))
    if out is not None:
        sys.stdout.flush()
    before = b""
    for n, (head, pods) in enumerate(line_pages(args)):
        if n == 0:
            errors = compact(head.get("manifest_errors") or [], sort_keys=True)
            write(f'{{"manifest_errors": {errors}, "pods": [\n'.encode())
        if pods:
            write(before + pods)
            before = b",\n"
    named = directory(args)
    if named["containers"]:
        write(b"\n], \"directory\": " + compact(named, sort_keys=True).encode() + b"}\n")
    else:
        write(b"\n]}\n")


def widen(widths: list[int], table: list[list[str]]) -> list[int]:
    """Column widths fitting ``table`` and never narrower than ``widths`` (pure): a page printed
    after another keeps the columns aligned with it unless a cell is wider than any before."""
    return [max([w, *(len(r[i]) for r in table)]) for i, w in enumerate(widths)]


def lines(table: list[list[str]], widths: list[int]) -> Iterator[str]:
    for r in table:
        yield "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()


def names(pods: list[dict[str, Any]]) -> list[str]:
    """``ps -q``'s lines (pure): each pod's name, ``NAMESPACE/NAME`` outside the default namespace
    (stop, rm, describe, signal, exec and logs take both)."""
    return [p["name"] if p["namespace"] == "default" else f"{p['namespace']}/{p['name']}" for p in pods]


#: the table of the workloads another front names (Slurm's jobs): the daemon's /v1/directory
DIRECTORY_HEADER = ["NAMESPACE", "NAME", "CONTAINER", "QOS", "USER"]


def directory(args: argparse.Namespace) -> dict[str, Any]:
    """The workloads another front names (``GET /v1/directory``: Slurm's jobs on this node), the
    caller's own unless root; empty from a daemon that has no such route."""
    with Session(args) as session:
        try:
            got = session.request("GET", "/v1/directory", timeout=30)
        except CommandError:
            got = {}
    if not isinstance(got.get("containers"), list):  # a daemon from before the route
        return {"source": "", "containers": []}
    return got


def user_name(uid: int | None) -> str:
    """A directory entry's owner uid as this machine names it ("-": unknown; the uid where unnamed)."""
    import pwd

    if uid is None:
        return "-"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def directory_rows(entries: list[dict[str, Any]]) -> list[list[str]]:
    """One row per container (a Slurm step), the owner's uid as a user name where this machine has one."""
    return [[e["namespace"] or "-", e["pod"], e["container"] or "-", e["qos"] or "-", user_name(e["owner_uid"])]
            for e in entries]


def run(args: argparse.Namespace) -> int:
    if getattr(args, "quiet", False):  # (a caller's own namespace may predate -q)
        for page in pages(args):
            sys.stdout.write("".join(n + "\n" for n in names(page["pods"])))
        return 0
    if args.format == "json":
        print_json(args)
        return 0
    widths = [0] * len(HEADER)
    errors: list[dict[str, str]] = []
    out = sys.stdout
    for n, page in enumerate(pages(args)):
        table = ([HEADER] if n == 0 else []) + body_rows(page["pods"])
        widths = widen(widths, table)
        out.write("".join(line + "\n" for line in lines(table, widths)))
        errors.extend(page["manifest_errors"])
    for e in errors:
        print(f"manifest error: {e['path']}: {e['error']}")
    named = directory(args)
    if named["containers"]:
        table = [DIRECTORY_HEADER, *directory_rows(named["containers"])]
        out.write(f"\nnamed by {named['source']}:\n")
        out.write("".join(line + "\n" for line in lines(table, widen([0] * len(DIRECTORY_HEADER), table))))
    return 0
