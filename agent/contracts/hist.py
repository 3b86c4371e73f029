"""Log2 latency histograms as the probes keep them, and their Prometheus shape.

bcc's ``bpf_log2l(v)`` puts v (µs) in slot ``floor(log2 v) + 1`` (0 and 1 both
land in slot 1), so slot s holds [2^(s-1), 2^s) µs and its Prometheus upper
bound is ``le = 2^s µs``. Buckets stop at ~1 s; longer waits land in +Inf.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Histogram", "prometheus_buckets", "MAX_BUCKET_SLOT"]

#: last finite bucket: slot 20 -> le 2^20 µs ≈ 1.05 s
MAX_BUCKET_SLOT = 20


@dataclass(frozen=True)
class Histogram:
    slots: tuple[int, ...] = ()
    sum_ns: int = 0

    @classmethod
    def from_slots(cls, slots: Iterable[int], sum_ns: int) -> Histogram:
        s = tuple(int(x) for x in slots)
        # trim trailing zeros so equal histograms compare equal whatever the map width
        end = len(s)
        while end and s[end - 1] == 0:
            end -= 1
        return cls(s[:end], int(sum_ns))

    @property
    def count(self) -> int:
        return sum(self.slots)

    def __add__(self, other: Histogram) -> Histogram:
        n = max(len(self.slots), len(other.slots))
        a = self.slots + (0,) * (n - len(self.slots))
        b = other.slots + (0,) * (n - len(other.slots))
        return Histogram.from_slots((x + y for x, y in zip(a, b, strict=True)), self.sum_ns + other.sum_ns)

    def __sub__(self, other: Histogram) -> Histogram:
        """Growth since an earlier snapshot of the same counters (never negative)."""
        n = max(len(self.slots), len(other.slots))
        a = self.slots + (0,) * (n - len(self.slots))
        b = other.slots + (0,) * (n - len(other.slots))
        return Histogram.from_slots((max(0, x - y) for x, y in zip(a, b, strict=True)), max(0, self.sum_ns - other.sum_ns))

    def quantile_us(self, q: float) -> float:
        """Upper bound (µs) of the slot holding quantile q; 0 when empty."""
        total = self.count
        if not total:
            return 0.0
        want = q * total
        acc = 0
        for s, c in enumerate(self.slots):
            acc += c
            if acc >= want:
                return float(2**s)
        return float(2 ** len(self.slots))


def prometheus_buckets(h: Histogram, max_slot: int = MAX_BUCKET_SLOT) -> list[tuple[str, int]]:
    """Cumulative (le, count) pairs, le in seconds as Prometheus text, ending with +Inf."""
    out: list[tuple[str, int]] = []
    acc = 0
    slots = h.slots
    for s in range(1, max_slot + 1):
        acc += slots[s] if s < len(slots) else 0
        if s == 1 and slots:
            acc += slots[0]  # slot 0 is never produced by bpf_log2l; fold it in defensively
        out.append((_le(s), acc))
    out.append(("+Inf", h.count))
    return out


def _le(slot: int) -> str:
    return repr((2**slot) / 1e6)
