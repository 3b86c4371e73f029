"""CPU pressure per container and per pool, and the eviction decision (pure).

Pressure is run-queue wait: seconds spent runnable-but-waiting per second of
wall time (the average number of a container's threads waiting for a CPU).
A pool is a group of containers whose cpusets overlap (reclaimed containers
running on the shared pool's CPUs join it; a dedicated container is alone);
its pressure is their summed wait per CPU of the pool. Like Katalyst's load plugin, a threshold is "met" when
enough samples in a sliding window are over it; unlike it, the signal is
measured in the kernel every second instead of a 1-minute load average, so a
decision comes seconds after the onset rather than minutes.

soft met -> reclaimed containers of the pool may be evicted;
hard met -> reclaimed first, then shared ones by their share of the pool's wait.
Dedicated and system containers are never candidates. One eviction per pool,
then a cool-down. Node PSI cpu "some" (share of time with a waiting task)
confirms, when available, so a stale or mis-attributed reading alone cannot evict.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.contracts.pressure import Container, Eviction, normalize_qos
from agent.cpuset import CPUSet

__all__ = [
    "Container",
    "EvictionPolicy",
    "Eviction",
    "PoolStatus",
    "PressureEvaluator",
    "normalize_qos",
    "container_from_record",
    "pools_of",
]


def container_from_record(r: Any) -> Container:
    """From a cpu_policy allocation record (duck-typed: pod_uid, container_name, ...)."""
    cs = r.cpuset if isinstance(r.cpuset, CPUSet) else CPUSet.parse(str(r.cpuset))
    return Container(
        pod_uid=r.pod_uid,
        container_name=r.container_name,
        qos_level=str(r.qos_level),
        cpuset=cs,
        cgroup_path=getattr(r, "cgroup_path", None),
        pod_namespace=getattr(r, "pod_namespace", "") or "",
        pod_name=getattr(r, "pod_name", "") or "",
    )


def pools_of(containers: Sequence[Container]) -> list[tuple[CPUSet, list[Container]]]:
    """Group containers whose cpusets overlap (transitively); each group with its CPUs."""
    groups: list[tuple[CPUSet, list[Container]]] = []
    for c in containers:
        cpus, members = c.cpuset, [c]
        rest = []
        for g_cpus, g_members in groups:
            if g_cpus & cpus:
                cpus = cpus | g_cpus
                members = g_members + members
            else:
                rest.append((g_cpus, g_members))
        groups = rest + [(cpus, members)]
    return sorted(groups, key=lambda g: str(g[0]))


@dataclass(frozen=True)
class EvictionPolicy:
    soft: float = 0.5
    hard: float = 1.0
    window_s: float = 3.0
    interval_s: float = 1.0
    met_fraction: float = 0.6
    cooldown_s: float = 30.0
    psi_confirm: float = 0.05

    @property
    def needed(self) -> int:
        """Samples over a threshold needed inside the window."""
        return max(1, math.ceil(self.met_fraction * self.window_s / self.interval_s - 1e-9))


@dataclass(frozen=True)
class PoolStatus:
    pool: str
    cpus: int
    pressure: float
    soft_met: bool
    hard_met: bool
    containers: Mapping[tuple[str, str], float]  # container key -> wait rate (s/s)


@dataclass
class _Pool:
    samples: deque = field(default_factory=deque)  # (t, pressure)
    cooldown_until: float = -1e18


class PressureEvaluator:
    """Feed cumulative wait per container each interval; get at most one eviction per pool."""

    def __init__(self, policy: EvictionPolicy) -> None:
        self.policy = policy
        self._last: dict[tuple[str, str], tuple[float, int]] = {}
        self._pools: dict[str, _Pool] = {}
        self.status: dict[str, PoolStatus] = {}
        self._last_psi: tuple[float, int] | None = None
        self.psi_ratio: float | None = None

    def _rates(self, now: float, containers: Sequence[Container], wait_ns: Mapping[tuple[str, str], int]) -> dict:
        rates: dict[tuple[str, str], float] = {}
        seen = {}
        for c in containers:
            total = wait_ns.get(c.key)
            if total is None:
                continue
            prev = self._last.get(c.key)
            seen[c.key] = (now, total)
            if prev is None or now <= prev[0]:
                continue
            rates[c.key] = max(0, total - prev[1]) / 1e9 / (now - prev[0])
        self._last = seen
        return rates

    def _psi(self, now: float, psi_some_total_us: int | None) -> float | None:
        if psi_some_total_us is None:
            self.psi_ratio = None
            return None
        prev, self._last_psi = self._last_psi, (now, psi_some_total_us)
        if prev is None or now <= prev[0]:
            return self.psi_ratio
        self.psi_ratio = max(0, psi_some_total_us - prev[1]) / 1e6 / (now - prev[0])
        return self.psi_ratio

    def _met(self, samples: deque, threshold: float) -> bool:
        return sum(1 for _, v in samples if v >= threshold) >= self.policy.needed

    def evaluate(
        self,
        now: float,
        containers: Sequence[Container],
        wait_ns: Mapping[tuple[str, str], int],
        psi_some_total_us: int | None = None,
        allow: Callable[[str], bool] | None = None,
    ) -> list[Eviction]:
        """``allow(qos)``: asked with the picked victim's QoS level; False holds the eviction
        back without starting the cool-down (the advisor's gate: suppress before evict, and
        never a shared pod), so it goes ahead on the first tick the gate allows."""
        p = self.policy
        rates = self._rates(now, containers, wait_ns)
        psi = self._psi(now, psi_some_total_us)
        out: list[Eviction] = []
        status = {}
        for pool_cpus, members in pools_of(containers):
            pool_name = str(pool_cpus)
            ncpu = max(1, len(pool_cpus))
            measured = {c.key: rates[c.key] for c in members if c.key in rates}
            st = self._pools.setdefault(pool_name, _Pool())
            if measured:
                pressure = sum(measured.values()) / ncpu
                st.samples.append((now, pressure))
            while st.samples and st.samples[0][0] <= now - p.window_s:
                st.samples.popleft()
            pressure = st.samples[-1][1] if st.samples else 0.0
            soft, hard = self._met(st.samples, p.soft), self._met(st.samples, p.hard)
            status[pool_name] = PoolStatus(pool_name, ncpu, pressure, soft, hard, measured)
            if not soft or now < st.cooldown_until:
                continue
            if p.psi_confirm > 0 and psi is not None and psi < p.psi_confirm:
                continue
            victim = self._pick(members, measured, hard)
            if victim is None:
                continue
            if allow is not None and not allow(victim.qos):
                continue
            pool_wait = sum(measured.values()) or 1.0
            pod_members = [c for c in members if c.pod_uid == victim.pod_uid]
            pod_wait = sum(measured.get(c.key, 0.0) for c in pod_members)
            reason = "cpu_pressure_hard" if hard else "cpu_pressure_soft"
            out.append(
                Eviction(
                    pod_uid=victim.pod_uid,
                    pod_namespace=victim.pod_namespace,
                    pod_name=victim.pod_name,
                    containers=tuple(sorted(c.container_name for c in pod_members)),
                    pool=pool_name,
                    reason=reason,
                    signal="runqueue_delay",
                    at=now,
                    evidence={
                        "pool_cpus": ncpu,
                        "pool_pressure": round(pressure, 4),
                        "threshold": p.hard if hard else p.soft,
                        "samples_over": sum(1 for _, v in st.samples if v >= (p.hard if hard else p.soft)),
                        "samples_needed": p.needed,
                        "window_s": p.window_s,
                        "qos": victim.qos,
                        "pod_wait_s_per_s": round(pod_wait, 4),
                        "pod_share": round(pod_wait / pool_wait, 4),
                        "node_psi_some": None if psi is None else round(psi, 4),
                    },
                )
            )
            st.cooldown_until = now + p.cooldown_s
            st.samples.clear()
        self.status = status
        return out

    @staticmethod
    def _pick(members: Sequence[Container], rates: Mapping[tuple[str, str], float], hard: bool) -> Container | None:
        """Reclaimed first, then (hard only) shared; within a class the pod with most wait."""
        classes = ("reclaimed", "shared") if hard else ("reclaimed",)
        for qos in classes:
            by_pod: dict[str, float] = {}
            first: dict[str, Container] = {}
            for c in members:
                if c.qos != qos:
                    continue
                by_pod[c.pod_uid] = by_pod.get(c.pod_uid, 0.0) + rates.get(c.key, 0.0)
                first.setdefault(c.pod_uid, c)
            if by_pod:
                uid = max(sorted(by_pod), key=lambda u: by_pod[u])
                return first[uid]
        return None
