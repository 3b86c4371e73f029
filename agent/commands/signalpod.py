"""`hwagent signal NAME SIG [-c CONTAINER]`: send a signal to every process of a container or pod.

The daemon's runtime does it (it owns the processes): every pid in the container's
cgroup gets the signal, as ``cgroup.procs`` lists them when it is sent, so a
workload's children get it too (``docker kill --signal`` reaches only PID 1; this is
``kill`` to the whole container, as ``systemctl kill`` sends to a unit's cgroup). The
signal's text goes to the daemon as written: it parses names and numbers, so a
program on the gRPC API gets the same rules.
"""

from __future__ import annotations

import argparse

from agent.commands._admission import add_common, call, pod_path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("signal", help="send a signal to every process of a pod (or one container)",
                              description="Send SIG to every process in the cgroup of each container of the pod "
                              "(or only of -c CONTAINER), as the kernel lists them now. SIG is a name (TERM, SIGUSR1, "
                              "hup) or a number (15). The runtime does not act on it: a container the signal ends "
                              "exits as any other (exit 128+SIG, reason Error) and its restart policy applies; "
                              "`hwagent stop` ends a pod for good. A non-root caller signals its own pods only.")
    add_common(p)
    p.add_argument("name")
    p.add_argument("signal", metavar="SIG", help="signal name or number (TERM, SIGUSR1, hup, 9)")
    p.add_argument("-c", "--container", default="", help="only this container (default: every container)")
    p.add_argument("--namespace", default="default")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    body = {"signal": args.signal, "container": args.container}
    r = call(args, "POST", pod_path(args.namespace, args.name, "signal"), body, name=args.name, timeout=30)
    pod = r["pod"]
    for c in r["containers"]:
        pids = " ".join(str(p) for p in c["pids"])
        what = f"pids {pids}" if pids else "nothing running"
        print(f"{r['signal']} -> {pod['namespace']}/{pod['name']} {c['name']}: {what}")
    return 0
