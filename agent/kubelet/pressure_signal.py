"""The run-queue-delay signal as Katalyst's eviction manager asks for it (pure).

Katalyst splits eviction into "is the threshold met" (``ThresholdMet``, every
sync) and "whom" (``GetTopEvictionPods``, on HARD_MET, topN=1 by default), and
does the evicting itself. hwagent's evaluator (agent.pressure.eviction) decides
and acts in one step, clearing its window after each decision; this watch keeps
the same per-pool windows and thresholds but only observes, so the answer to
``ThresholdMet`` stays stable between Katalyst's calls. The cool-down starts
when candidates are handed out.

Pool pressure and the candidate order are hwagent's: containers whose cpusets
overlap form a pool, pressure = their summed run-queue wait per CPU of the pool;
candidates are reclaimed pods first, then (hard only) shared pods, each class by
its share of the pool's wait. Dedicated and system pods are never candidates.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agent.pressure.eviction import EvictionPolicy, pools_of
from agent.contracts.pressure import Container

__all__ = ["PoolWatch", "PoolReading", "Verdict", "Candidate", "NOT_MET", "SOFT_MET", "HARD_MET"]

NOT_MET, SOFT_MET, HARD_MET = 0, 1, 2


@dataclass(frozen=True)
class PoolReading:
    pool: str
    cpus: int
    pressure: float
    level: int
    #: pod uid -> wait rate (s/s) summed over its containers in this pool
    pod_wait: Mapping[str, float]
    members: tuple[Container, ...]


@dataclass(frozen=True)
class Verdict:
    level: int
    threshold: float
    observed: float
    pool: str


@dataclass(frozen=True)
class Candidate:
    pod_uid: str
    namespace: str
    name: str
    qos: str
    pool: str
    share: float
    wait_s_per_s: float


@dataclass
class _Window:
    samples: deque = field(default_factory=deque)


def _met(samples: list[float], threshold: float, needed: int) -> bool:
    """Whether enough samples of the window reach the threshold."""
    return sum(1 for v in samples if v >= threshold) >= needed


class PoolWatch:
    def __init__(self, policy: EvictionPolicy) -> None:
        self.policy = policy
        self._last: dict[tuple[str, str], tuple[float, int]] = {}
        self._windows: dict[str, _Window] = {}
        self.readings: dict[str, PoolReading] = {}
        self.cooldown_until = -1e18

    def observe(self, now: float, containers: Sequence[Container], wait_ns: Mapping[tuple[str, str], int]) -> None:
        """One sample: per-container wait counters (cumulative ns) at ``now``."""
        rates: dict[tuple[str, str], float] = {}
        seen: dict[tuple[str, str], tuple[float, int]] = {}
        for c in containers:
            total = wait_ns.get(c.key)
            if total is None:
                continue
            seen[c.key] = (now, total)
            prev = self._last.get(c.key)
            if prev is not None and now > prev[0]:
                rates[c.key] = max(0, total - prev[1]) / 1e9 / (now - prev[0])
        self._last = seen
        p = self.policy
        readings = {}
        for cpus, members in pools_of(containers):
            name = str(cpus)
            ncpu = max(1, len(cpus))
            w = self._windows.setdefault(name, _Window())
            measured = {c.key: rates[c.key] for c in members if c.key in rates}
            if measured:
                w.samples.append((now, sum(measured.values()) / ncpu))
            while w.samples and w.samples[0][0] <= now - p.window_s:
                w.samples.popleft()
            samples = [v for _, v in w.samples]
            level = (HARD_MET if _met(samples, p.hard, p.needed)
                     else SOFT_MET if _met(samples, p.soft, p.needed) else NOT_MET)
            pod_wait: dict[str, float] = {}
            for c in members:
                pod_wait[c.pod_uid] = pod_wait.get(c.pod_uid, 0.0) + measured.get(c.key, 0.0)
            readings[name] = PoolReading(name, ncpu, w.samples[-1][1] if w.samples else 0.0, level, pod_wait,
                                         tuple(members))
        for gone in set(self._windows) - set(readings):
            del self._windows[gone]
        self.readings = readings

    def verdict(self) -> Verdict:
        """The worst pool: its level, the threshold it is judged against and its pressure."""
        p = self.policy
        if not self.readings:
            return Verdict(NOT_MET, p.soft, 0.0, "")
        worst = max(self.readings.values(), key=lambda r: (r.level, r.pressure, r.pool))
        threshold = p.hard if worst.level == HARD_MET else p.soft
        return Verdict(worst.level, threshold, worst.pressure, worst.pool)

    def candidates(self, now: float, top_n: int, *, start_cooldown: bool = True) -> list[Candidate]:
        """Up to ``top_n`` pods to evict, in order; none while cooling down or when nothing is met."""
        if now < self.cooldown_until or top_n <= 0:
            return []
        out: list[Candidate] = []
        met = sorted((r for r in self.readings.values() if r.level > NOT_MET),
                     key=lambda r: (-r.level, -r.pressure, r.pool))
        seen: set[str] = set()
        for r in met:
            classes = ("reclaimed", "shared") if r.level == HARD_MET else ("reclaimed",)
            total = sum(r.pod_wait.values()) or 1.0
            for qos in classes:
                pods = {c.pod_uid: c for c in r.members if c.qos == qos}
                for uid in sorted(pods, key=lambda u: (-r.pod_wait.get(u, 0.0), u)):
                    if uid in seen:
                        continue
                    seen.add(uid)
                    c = pods[uid]
                    out.append(Candidate(uid, c.pod_namespace, c.pod_name, qos, r.pool,
                                         round(r.pod_wait.get(uid, 0.0) / total, 4), round(r.pod_wait.get(uid, 0.0), 4)))
        out = out[:top_n]
        if out and start_cooldown:
            self.cooldown_until = now + self.policy.cooldown_s
        return out
