"""`hwagent explain [pool|POD]`: why the pools are the size they are, why a pod was suppressed or evicted.

Reads what the advisor recorded under ``<root>/advisor/`` (its state and its decisions
log) and the pressure engine's ``<root>/pressure/evictions.jsonl``; needs no running
daemon, so it also explains what happened before a restart.

A workload hwagent did not admit but another front names (a Slurm job on this node, an
NRI pod) is not in those records: for it explain asks the daemon's pod directory (``GET
/v1/directory``, the door ``ps`` and ``describe`` take) and says who it is, who runs it, its
class and each step's CPUs (agent.commands._explain_named).

Root's only: the records name every user's pods (which were squeezed, which evicted), so
they are root's files (``agent.daemon.rootmodes``), and anyone else is told so, with what to
do, rather than "the advisor has recorded nothing" (issue 32 item 7). A member's own pods are
explained by ``hwagent describe``.
"""

from __future__ import annotations

import argparse
import json
import time

from agent.cli import CommandError
from agent.commands._admission import add_common

#: decisions shown
RECENT = 8


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "explain", help="why the pools are this size, why a pod was suppressed or evicted",
        description="Explain the advisor's decisions from <root>/advisor/ (its state and decisions.jsonl) and "
        "<root>/pressure/evictions.jsonl: with `pool` (the default) the shared pool's size, the reclaimed pods' "
        "quota, the headroom left to them and the recent changes with their reasons; with a pod name, its state "
        "now first (suppressed or not, as the latest decision has it), then its history: when it was held, the "
        "decisions that changed it, its eviction. A Slurm job on this node (job_ID, or PARTITION/job_ID), or a pod "
        "another front names, is explained from the daemon's pod directory: its user, partition, class (reclaimed: "
        "preemptible) and each step's CPUs. Root only: the records name every "
        "user's pods, so they are root's files; anyone else is refused with a permission message (a member's "
        "own pods: `hwagent describe NAME`).")
    add_common(p)
    p.add_argument("target", nargs="?", default="pool",
                   help="`pool` (default), a pod name, or a Slurm job (job_ID or PARTITION/job_ID)")
    p.add_argument("--namespace", default=None, help="the pod's namespace (default: default; a Slurm job's "
                   "partition is found without it)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def _evictions(root, ns: str, name: str) -> list[dict]:
    from agent.advisor.record import _tail

    return [e for e in _tail(root / "pressure" / "evictions.jsonl")
            if e.get("pod_name") == name and e.get("pod_namespace", "default") == ns]


def _pool(root, state: dict | None, decisions: list[dict]) -> list[str]:
    from agent.advisor.record import format_decision

    if state is None and not decisions:
        return [f"the advisor has recorded nothing under {root}/advisor: it is off ([advisor] enabled = false) or "
                "has not run; the pools are sized from requests (docs/cpu-policy.md) and pressure evicts on its "
                "own thresholds (docs/pressure.md)"]
    last = (state or {}).get("last") or (decisions[-1] if decisions else {})
    lim = last.get("limits") or {}
    inp = last.get("inputs") or {}
    size, q = last.get("shared_size"), last.get("quota_cpus")
    out = [f"shared pool: {size} cpus; its requests need {lim.get('shared_min')}, at most {lim.get('shared_max')} "
           "(the cpus neither reserved nor dedicated)"]
    asked = lim.get("shared_requests")
    if isinstance(asked, (int, float)) and isinstance(lim.get("shared_max"), int):
        from agent.cpu.overcommit import overcommit_note

        note = overcommit_note(float(asked), lim["shared_max"])
        if note is not None:
            out.append(f"overcommitted: {note}")
    p99 = inp.get("shared_p99_us")
    floor = (last.get("state") or {}).get("floor_us")
    why_target = "" if floor is None else (f" (the fixed target, or [advisor] floor_factor x {floor:.0f}us, the "
                                           "delay the shared pods have without reclaimed pods, if higher)")
    out.append(f"target: run-queue delay p99 <= {last.get('target_us'):.0f}us{why_target}; last interval p99 "
               f"{'-' if p99 is None else f'{p99:.0f}us'}, shared pods used {inp.get('shared_usage')} cpus")
    # state.json's last decision keeps the inputs' count, not the names the decisions log has
    n_reclaimed = inp.get("reclaimed", len(last.get("reclaimed_pods") or []))
    if q is None:
        out.append(f"reclaimed pods ({n_reclaimed}): not suppressed; reclaim pool {lim.get('reclaim_cpus')} cpus")
    else:
        out.append(f"reclaimed pods ({n_reclaimed}): suppressed, held together to {q} cpus (a CFS quota on "
                   f"their pod cgroups, on top of cpu.idle)")
    if state is not None and "headroom_cpus" in state:
        out.append(f"headroom for reclaimed pods: {state['headroom_cpus']} cpus")
    out += _memory(state, decisions)
    changes = [d for d in decisions if d.get("action") != "hold"]
    if changes:
        out.append(f"why: {changes[-1].get('reason')}")
    out.append("recent changes:" if changes else "recent changes: none (the pools are as the policy sized them)")
    out += ["  " + format_decision(d) for d in changes[-RECENT:]]
    return out


def _mib(b) -> str:
    return f"{b / (1 << 20):.0f}MiB" if isinstance(b, int) else "max"


def _memory(state: dict | None, decisions: list[dict]) -> list[str]:
    """The memory.high squeeze ([advisor] memory_high): what is lowered now, the last changes."""
    mem = [d["memory"] for d in decisions if isinstance(d.get("memory"), dict)]
    if not mem:
        return []
    highs = ((state or {}).get("memory") or {}).get("highs")
    if highs is None:
        highs = mem[-1].get("highs") or {}
    who = mem[-1].get("who") or {}
    inp = mem[-1].get("inputs") or {}
    out = [f"memory: node memory PSI some {inp.get('psi_some')} of the last interval (lowered above "
           f"{mem[-1].get('threshold')}); reclaimed pods' memory.high " +
           (", ".join(f"{who.get(k, k)} {_mib(v)}" for k, v in sorted(highs.items())) if highs else "not lowered")]
    changes = [(d, x) for d in decisions if isinstance((x := d.get("memory")), dict) and x.get("action") != "hold"]
    out += [f"  {_at(d)} memory {x.get('action')}: {x.get('reason')}" for d, x in changes[-RECENT:]]
    return out


def _at(rec: dict) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(rec.get("wall_time") or 0))


def _pod(root, ns: str, name: str, decisions: list[dict]) -> list[str]:
    from agent.advisor.record import decisions_before, format_decision

    who = f"{ns}/{name}"
    as_reclaimed = [d for d in decisions if who in (d.get("reclaimed_pods") or [])]
    as_shared = [d for d in decisions if who in (d.get("shared_pods") or [])]
    out = []
    if as_reclaimed:
        out += reclaimed_story(who, as_reclaimed, decisions[-1])
        changes = [d for d in as_reclaimed if d.get("action") != "hold"]
        if changes:
            out.append("history (the advisor's changes while it named the pod):")
            out += ["  " + format_decision(d) for d in changes[-RECENT:]]
    elif as_shared:
        out.append(f"{who} is a shared pod; the advisor sizes its pool to keep its run-queue delay under the target")
        out += [line for line in _pool(root, None, as_shared[-1:]) if line.startswith("overcommitted: ")]
    out += _pod_memory(who, decisions)
    evs = _evictions(root, ns, name)
    for e in evs:
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(e.get("wall_time") or 0))
        out.append(f"evicted {at}: {e.get('reason')} ({e.get('signal')}), action {e.get('action')}, evidence "
                   f"{json.dumps(e.get('evidence') or {}, sort_keys=True)}")
        before = decisions_before(root, e.get("wall_time") or 0)
        out.append("  the advisor's last decisions before it:" if before else
                   "  no advisor decision before it (the advisor was off: pressure evicted on its own thresholds)")
        out += ["    " + format_decision(d) for d in before]
    if not out:
        raise CommandError(f"nothing recorded about {who}: no advisor decision names it and it was not evicted")
    return out


def suppressed_spans(named: list[dict]) -> list[tuple[float, float | None]]:
    """(from, to) of each stretch the pod's decisions held a quota; ``to`` None: still held at
    the last of them."""
    spans: list[tuple[float, float | None]] = []
    start = None
    for d in named:
        t = d.get("wall_time") or 0
        if d.get("quota_cpus") is not None and start is None:
            start = t
        elif d.get("quota_cpus") is None and start is not None:
            spans.append((start, t))
            start = None
    if start is not None:
        spans.append((start, None))
    return spans


def reclaimed_story(who: str, named: list[dict], latest: dict) -> list[str]:
    """A reclaimed pod's state now, then its suppressions (pure). ``named``: the decisions naming
    it, oldest first; ``latest``: the advisor's latest decision of all. "Now" is the latest
    decision: a quota lifted since the pod was suppressed reads as lifted (it read "suppressed
    from 15:31:26" after the quota was lifted at 15:31:58), and a pod the latest decision does
    not name any more says so before anything it went through."""
    spans = suppressed_spans(named)
    last = named[-1]
    if last is not latest and who not in (latest.get("reclaimed_pods") or []):
        head = (f"{who}: the advisor's latest decision ({_at(latest)}) does not name it (ended, removed, or no "
                f"longer reclaimed); it was last named at {_at(last)}")
    elif spans and spans[-1][1] is None:
        head = (f"{who} is a reclaimed pod: suppressed now, since {_at({'wall_time': spans[-1][0]})}, held to "
                f"{last.get('quota_cpus')} cpus together with {len(last.get('reclaimed_pods') or [])} reclaimed "
                f"pods (a CFS quota) because the shared pool's delay was over its target")
    elif spans:
        head = (f"{who} is a reclaimed pod: not suppressed now (quota lifted at {_at({'wall_time': spans[-1][1]})})")
    else:
        head = f"{who} is a reclaimed pod: not suppressed now; the advisor has not suppressed it"
    out = [head]
    if spans:
        out.append("suppressed: " + ", ".join(
            f"{_at({'wall_time': a})}-{'now' if b is None else _at({'wall_time': b})}" for a, b in spans))
    return out


def _pod_memory(who: str, decisions: list[dict]) -> list[str]:
    """The pod's memory.high changes: lowered (when, to what, why), raised, lifted."""
    changes = []
    for d in decisions:
        mem = d.get("memory")
        if not isinstance(mem, dict) or mem.get("action") == "hold":
            continue
        cgs = [k for k, w in (mem.get("who") or {}).items() if w == who]
        if not cgs:
            continue
        high = (mem.get("highs") or {}).get(cgs[0])
        changes.append(f"  {_at(d)} memory {mem.get('action')}: memory.high {_mib(high)}; {mem.get('reason')}")
    if not changes:
        return []
    return [f"{who}'s memory.high (lowered under node memory pressure so the kernel reclaims it first):"] + \
        changes[-RECENT:]


#: where the records live, under the root dir
RECORD_DIRS = ("advisor", "pressure")


def refusal(root) -> str | None:
    """The permission message when the caller cannot pass the root dir or read a records
    directory that exists, else None (root, or nothing recorded yet)."""
    import os

    blocked = os.path.isdir(root) and not os.access(root, os.X_OK)
    for name in RECORD_DIRS:
        d = root / name
        if blocked or (os.path.lexists(d) and not os.access(d, os.R_OK | os.X_OK)):
            return (f"permission denied: explain reads {d}, which only root may read (it names every user's "
                    "pods); run it as root (sudo hwagent explain), or see your own pods with `hwagent describe NAME`")
    return None


def run(args: argparse.Namespace) -> int:
    from agent.advisor.record import read_decisions, read_state
    from agent.commands._config import daemon_root

    root = daemon_root(args)
    refused = refusal(root)
    if refused is not None:
        raise CommandError(refused, 1)
    decisions = read_decisions(root)
    if args.target == "pool":
        state = read_state(root)
        if args.format == "json":
            print(json.dumps({"state": state, "decisions": decisions[-RECENT:]}, sort_keys=True))
            return 0
        print("\n".join(_pool(root, state, decisions)))
        return 0
    ns = args.namespace or "default"
    if args.format == "json":
        named_json = _named(args)
        if named_json is not None and not _recorded(root, ns, args.target, decisions):
            print(json.dumps({"source": named_json[0], "containers": named_json[1]}, sort_keys=True))
            return 0
        print(json.dumps({"evictions": _evictions(root, ns, args.target),
                          "decisions": [d for d in decisions if f"{ns}/{args.target}" in
                                        (d.get("reclaimed_pods") or []) + (d.get("shared_pods") or [])][-RECENT:]},
                         sort_keys=True))
        return 0
    try:
        print("\n".join(_pod(root, ns, args.target, decisions)))
    except CommandError as nothing:
        named = _named(args)
        if named is None:
            raise CommandError(f"{nothing}; nor does a running daemon's pod directory name it (no Slurm job or pod of "
                               "another front by that name on this node)", nothing.code) from None
        from agent.commands._explain_named import explain_named
        from agent.commands.ps import user_name

        print("\n".join(explain_named(named[0], named[1], user_name)))
    return 0


def _recorded(root, ns: str, name: str, decisions: list[dict]) -> bool:
    """Whether the advisor's or the eviction records name pod ``ns/name``."""
    who = f"{ns}/{name}"
    return bool(_evictions(root, ns, name)) or any(
        who in (d.get("reclaimed_pods") or []) + (d.get("shared_pods") or []) for d in decisions)


def _named(args: argparse.Namespace) -> tuple[str, list[dict]] | None:
    """(source, entries) of the target in the daemon's pod directory (a Slurm job, an NRI pod), or
    None where it names none or no daemon answers."""
    from agent.commands._explain_named import find_named
    from agent.commands.ps import directory

    try:
        got = directory(args)
    except CommandError:  # no daemon: nothing named now
        return None
    entries = find_named(got["containers"], args.namespace, args.target)
    return (got["source"], entries) if entries else None
