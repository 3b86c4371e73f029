from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent.contracts.hist import Histogram, prometheus_buckets


def test_log2_slots_become_cumulative_le_buckets_in_seconds():
    h = Histogram.from_slots([0, 3, 0, 2] + [0] * 28, 12_345)
    b = prometheus_buckets(h)
    assert b[0] == ("2e-06", 3)  # slot 1 holds [1, 2) us -> le 2 us
    assert b[1] == ("4e-06", 3)
    assert b[2] == ("8e-06", 5)
    assert b[-1] == ("+Inf", 5)
    assert len(b) == 21
    assert h.slots == (0, 3, 0, 2)  # trailing zeros trimmed


def test_waits_beyond_the_last_bucket_only_in_inf():
    h = Histogram.from_slots([0] * 25 + [4], 0)
    b = prometheus_buckets(h)
    assert b[-2][1] == 0 and b[-1] == ("+Inf", 4)


@given(st.lists(st.integers(0, 10**6), max_size=32), st.lists(st.integers(0, 10**6), max_size=32))
def test_growth_roundtrip(a, d):
    base = Histogram.from_slots(a, sum(a))
    grown = base + Histogram.from_slots(d, sum(d))
    assert (grown - base) == Histogram.from_slots(d, sum(d))
    assert (base - grown).count == 0  # never negative
    buckets = prometheus_buckets(grown)
    assert all(x[1] <= y[1] for x, y in zip(buckets, buckets[1:], strict=False))


def test_quantile():
    h = Histogram.from_slots([0, 90, 0, 0, 10], 0)
    assert h.quantile_us(0.5) == 2.0 and h.quantile_us(0.99) == 16.0
    assert Histogram().quantile_us(0.9) == 0.0
