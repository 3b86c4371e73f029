"""What `hwagent probes` shows: one interval's deltas of the engine's readings.

Pure shaping of the pressure engine's last readings into a document and its
text rendering; kept apart from the command so the CLI loads it only when run.
"""

from __future__ import annotations

from agent.contracts.hist import Histogram
from agent.pressure.readers import block_name


def _delta(cur: dict, prev: dict) -> dict:
    return {k: v - prev.get(k, Histogram()) for k, v in cur.items()}


def snapshot(engine, prev_rq: dict, prev_blk: dict, dt: float, top: int) -> dict:
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
            {"cgroup": p, "wait_s_per_s": round(h.sum_ns / 1e9 / dt, 4), "switch_ins": h.count,
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
    lines.append(f"{'CGROUP':<60} {'WAIT s/s':>9} {'SWITCH-INS':>10} {'p99 us':>8}")
    for c in s["cgroups"]:
        p99 = "-" if c["p99_us"] is None else f"{c['p99_us']:.0f}"
        lines.append(f"{c['cgroup'][-60:]:<60} {c['wait_s_per_s']:>9.3f} {c['switch_ins']:>10} {p99:>8}")
    lines.append(f"{'DEVICE':<16} {'ERRORS':>7}  OPS")
    for dev, d in sorted(s["block"].items(), key=lambda kv: (-kv[1]["errors"], kv[0])):
        ops = " ".join(f"{op}:{v['ios']}@p99<{v['p99_us'] or '-'}us" for op, v in sorted(d["ops"].items()))
        lines.append(f"{d['name'] + ' ' + dev:<16} {d['errors']:>7}  {ops}")
    for n, c in s["net"].items():
        lines.append(f"net {n}: {c}")
    for k, r in s["unhealthy"].items():
        lines.append(f"UNHEALTHY {k}: {r}")
    return "\n".join(lines)
