"""`hwagent describe NAME`: one pod in full: spec, what each container got, status, events."""

from __future__ import annotations

import argparse
import time

from agent.commands._admission import add_common, call, container_line, dumps, format_pod_line, pod_path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("describe", help="show one admitted pod in full",
                              description="Show one pod: its spec, CPUs, memory nodes, NUMA affinity, requests and "
                              "limits (cpu, memory, hugepages, devices), devices, device grants and memory blocks (memory and hugepages per NUMA node) per container, "
                              "its status and its events, and its cgroups with the pids in each container's cgroup, "
                              "read when the daemon answers. A pod hwagent did not admit but another front names "
                              "(the NRI runtime's) is shown as the pod directory has it: its containers, QoS and "
                              "cgroups.")
    add_common(p)
    p.add_argument("name")
    p.add_argument("--namespace", default="default")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def _quantity(n: int) -> str:
    """Bytes as a Kubernetes quantity when exact (512Mi, 2Gi), else plain bytes: what --memory took."""
    for unit, suffix in ((1 << 40, "Ti"), (1 << 30, "Gi"), (1 << 20, "Mi"), (1 << 10, "Ki")):
        if n and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def _cpus(milli: int) -> str:
    """Millicores as the flag took them: ``100m``, ``2``, ``1500m``."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def resources_line(r: dict) -> str | None:
    """A container's requests and limits (the spec's ``resources``) as one line, in the units
    ``launch`` takes (``cpu request 500m, memory limit 1Gi (request 512Mi)``); None when it
    asks for nothing. The memory limit is what the kernel enforces in the pod's cgroup."""
    parts = []
    req, lim = r.get("cpu_request_milli"), r.get("cpu_limit_milli")
    if req is not None or lim is not None:
        cpu = ", ".join(p for p in (f"request {_cpus(req)}" if req is not None else "",
                                    f"limit {_cpus(lim)}" if lim is not None else "") if p)
        parts.append(f"cpu {cpu}")
    mreq, mlim = r.get("memory_request_bytes"), r.get("memory_limit_bytes")
    if mlim is not None:
        parts.append(f"memory limit {_quantity(mlim)}" + (f" (request {_quantity(mreq)})" if mreq else ""))
    elif mreq is not None:
        parts.append(f"memory request {_quantity(mreq)} (no limit)")
    parts.extend(f"{k} {_quantity(v)}" for k, v in sorted((r.get("hugepages") or {}).items()))
    parts.extend(f"{k} {v}" for k, v in sorted((r.get("extended") or {}).items()))
    return ", ".join(parts) or None


def memory_line(b: dict) -> str:
    """A memory block of the JSON pod: ``hugepages-2Mi 64Mi on NUMA 0``, with the split over several nodes."""
    where = ",".join(str(n) for n in b["numa_nodes"])
    split = ", ".join(f"{n}={_quantity(v)}" for n, v in b["per_node"].items()) if len(b["numa_nodes"]) > 1 else ""
    return f"{b['resource']} {_quantity(b['size'])} on NUMA {where}" + (f" ({split})" if split else "")


def directory_pod(entries: list[dict], namespace: str, name: str) -> list[dict]:
    """The directory's entries of pod ``namespace/name`` (a ``name`` written NAMESPACE/NAME names
    its namespace), its sandbox first (pure)."""
    if "/" in name:
        namespace, _, name = name.rpartition("/")
    return sorted((x for x in entries if (x["namespace"], x["pod"]) == (namespace, name)),
                  key=lambda x: (x["container"] != "", x["container"]))


def describe_named(named: dict, entries: list[dict]) -> list[str]:
    """A pod another front names (the NRI runtime's), as far as the pod directory knows it."""
    head = entries[0]
    out = [f"{head['namespace']}/{head['pod']}: named by {named['source']} (not admitted by hwagent: "
           "`hwagent cpus` and `hwagent memory` show where its containers are placed)",
           "containers:"]
    for entry in entries:
        who = entry["container"] or "(pod sandbox)"
        out.append(f"  {who}: qos {entry['qos'] or '-'}, cgroup {entry['cgroup']}")
    return out


def run(args: argparse.Namespace) -> int:
    from agent.cli import CommandError
    from agent.commands._exitcodes import EXIT_NOT_FOUND

    try:
        pod = call(args, "GET", pod_path(args.namespace, args.name), name=args.name, timeout=30)["pod"]
    except CommandError as refused:
        if refused.code != EXIT_NOT_FOUND:
            raise
        # not admitted here: a pod another front names (the NRI runtime's) is described as the directory has it
        from agent.commands.ps import directory

        named = directory(args)
        entries = directory_pod(named["containers"], args.namespace, args.name)
        if not entries:
            raise
        if args.format == "json":
            print(dumps({"source": named["source"], "containers": entries}))
        else:
            print("\n".join(describe_named(named, entries)))
        return 0
    record = pod["record"]
    if args.format == "json":
        print(dumps(pod))
        return 0
    spec = record["pod"]["spec"]
    print(format_pod_line(pod))
    if pod["message"]:
        print(f"message: {pod['message']}")
    print(f"source: {pod['source']}   "
          f"admitted: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(pod['admitted_at']))}"
          f"   resources released: {'yes' if pod['released'] else 'no'}")
    for k, v in sorted(spec["annotations"].items()):
        print(f"annotation: {k}={v}")
    print(f"restart policy: {spec['restart_policy']}   grace period: {spec['termination_grace_period_s']}s")
    if pod.get("cgroup"):
        print(f"cgroup: {pod['cgroup']}")
        for d in pod["cgroup_dirs"]:
            print(f"  {d}")
    grants = {a["name"]: a["grant"] for a in record["pod"]["assignments"]}
    containers = {c["name"]: c for c in spec["init_containers"] + spec["containers"]}
    print("containers:")
    for c in pod["containers"]:
        _print_container(c, containers.get(c["name"], {}), grants.get(c["name"]) or {})
    print("events:")
    for e in pod["events"]:
        print(f"  {time.strftime('%H:%M:%S', time.gmtime(e['time']))}  {e['message']}")
    _advisor_before(args, pod)
    return 0


def _print_container(c: dict, cs: dict, g: dict) -> None:
    """One container: what it got (``c``), its spec (``cs``) and its device grant (``g``)."""
    print(container_line(c))
    print(f"    {c['kind']} command: {' '.join(cs.get('command', []) + cs.get('args', []))}")
    asked = resources_line(cs.get("resources") or {})
    if asked:
        print(f"    resources: {asked}")
    if c["state"]:
        extra = f" exit {c['exit_code']}" if c["exit_code"] is not None else ""
        reason = f" ({c['reason']})" if c["reason"] else ""
        print(f"    state: {c['state']}{reason}{extra} restarts={c['restart_count']}")
    if c.get("cgroup"):
        pids = " ".join(str(p) for p in c["pids"]) or "none"
        print(f"    cgroup {c['cgroup']}, pids {pids}")
    for k, v in sorted((g.get("envs") or {}).items()):
        print(f"    device env: {k}={v}")
    for cpath, hpath, perms in g.get("devices") or []:
        print(f"    device node: {hpath} -> {cpath} ({perms})")
    for cpath, hpath, ro in g.get("mounts") or []:
        print(f"    device mount: {hpath} -> {cpath}{' (ro)' if ro else ''}")
    for name in g.get("cdi_devices") or []:
        print(f"    CDI device: {name}")
    for b in c.get("memory") or []:
        print(f"    memory: {memory_line(b)}")


def _advisor_before(args: argparse.Namespace, pod: dict) -> None:
    """An evicted pod: the advisor's last decisions before its eviction (`hwagent explain POD` says more)."""
    if pod.get("reason") != "Evicted":
        return
    from agent.advisor.record import decisions_before, format_decision
    from agent.commands._config import daemon_root

    root = daemon_root(args)
    evicted_at = max((e["time"] for e in pod["events"]), default=time.time())
    before = decisions_before(root, evicted_at)
    if not before:
        print("advisor: no decision recorded before the eviction (the advisor is off: [advisor] enabled)")
        return
    print("advisor decisions before the eviction (hwagent explain " + pod["name"] + " for more):")
    for d in before:
        print("  " + format_decision(d))
