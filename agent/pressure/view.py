"""What `hwagent probes` shows: one interval's deltas of the engine's readings.

Pure shaping of the pressure engine's last readings into a document and its
text rendering; kept apart from the command so the CLI loads it only when run.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.cgroups.kubepods import parse_pod_dir
from agent.contracts.hist import Histogram
from agent.pressure.readers import block_name

#: a container directory that is a kubelet's container id is shortened as docker and crictl print ids
_ID_CHARS = 12


def pod_of(cgroup: str, pods: Mapping[str, str]) -> str | None:
    """``NAMESPACE/NAME [CONTAINER]`` of the pod whose cgroup ``cgroup`` is or lies in (pure): the
    path's ``pod<uid>`` directory (the runtime's and the kubelet's cgroupfs layout, or the systemd
    driver's ``kubepods-...-pod<uid>.slice``) looked up in ``pods`` (uid -> ``NAMESPACE/NAME``, the
    daemon's pods); the directory below it names the container (a long container id cut to 12).
    None for a cgroup of no known pod."""
    parts = [p for p in cgroup.split("/") if p]
    for i, part in enumerate(parts):
        found = parse_pod_dir("", part)
        if found is None:
            continue
        name = pods.get(found[0])
        if name is None:
            return None
        if i + 1 < len(parts):
            below = parts[i + 1].removesuffix(".scope").rpartition("-")[2]
            return f"{name} {below[:_ID_CHARS] if len(below) >= 32 else below}"
        return name
    return None


def _delta(cur: dict, prev: dict) -> dict:
    return {k: v - prev.get(k, Histogram()) for k, v in cur.items()}


def snapshot(engine, prev_rq: dict, prev_blk: dict, dt: float, top: int, pods: Mapping[str, str] | None = None) -> dict:
    """One interval's readings; ``pods`` (uid -> ``NAMESPACE/NAME``) names each cgroup's pod."""
    rq = _delta(engine.last_runqueue, prev_rq)
    cg = sorted(rq.items(), key=lambda kv: -kv[1].sum_ns)[:top]
    lat = _delta(engine.last_block.latency, prev_blk)
    devs: dict[str, dict] = {}
    for (dev, op), h in lat.items():
        if h.count or h.sum_ns:
            d = devs.setdefault(dev, {"name": block_name(dev, engine.sysfs_root), "errors": 0, "ops": {}})
            d["ops"][op] = {"ios": h.count, "p99_us": h.quantile_us(0.99) if h.slots else None}
    for dev, n in engine.last_block.errors_by_device().items():
        devs.setdefault(dev, {"name": block_name(dev, engine.sysfs_root), "errors": 0, "ops": {}})["errors"] = n
    return {
        "probes": {n: m for n, (m, _d) in engine.status().items()},
        "cgroups": [
            {"cgroup": p, "pod": pod_of(p, pods or {}), "wait_s_per_s": round(h.sum_ns / 1e9 / dt, 4),
             "switch_ins": h.count,
             "p99_us": h.quantile_us(0.99) if h.slots else None}
            for p, h in cg
        ],
        "block": devs,
        "net": {n: c.__dict__ for n, c in engine.last_net.items() if c.tx_errors or c.tx_busy or c.tx_timeouts},
        "unhealthy": {f"{k}:{d}": r for (k, d), r in engine.health.tracker.unhealthy().items()},
        "evictions": len(engine.record.recent),
    }


def render(s: dict) -> str:
    lines = ["probes: " + "  ".join(f"{n}={m}" for n, m in s["probes"].items())]
    pod_w = max([3, *(len(c.get("pod") or "-") for c in s["cgroups"])])
    lines.append(f"{'POD':<{pod_w}} {'CGROUP':<48} {'WAIT s/s':>9} {'SWITCH-INS':>10} {'p99 us':>8}")
    for c in s["cgroups"]:
        p99 = "-" if c["p99_us"] is None else f"{c['p99_us']:.0f}"
        lines.append(f"{c.get('pod') or '-':<{pod_w}} {c['cgroup'][-48:]:<48} {c['wait_s_per_s']:>9.3f} "
                     f"{c['switch_ins']:>10} {p99:>8}")
    lines.append(f"{'DEVICE':<16} {'ERRORS':>7}  OPS")
    for dev, d in sorted(s["block"].items(), key=lambda kv: (-kv[1]["errors"], kv[0])):
        ops = " ".join(f"{op}:{v['ios']}@p99<{v['p99_us'] or '-'}us" for op, v in sorted(d["ops"].items()))
        lines.append(f"{d['name'] + ' ' + dev:<16} {d['errors']:>7}  {ops}")
    for n, c in s["net"].items():
        lines.append(f"net {n}: {c}")
    for k, r in s["unhealthy"].items():
        lines.append(f"UNHEALTHY {k}: {r}")
    return "\n".join(lines)
