"""The kubelet's topology-manager admission metrics, with the hwagent_ prefix.

The kubelet exports ``topology_manager_admission_requests_total``,
``..._admission_errors_total`` and ``..._admission_duration_ms``; the duration is
in seconds here, the Prometheus base unit (hence ``_seconds``), with buckets from
half a millisecond to about 16 seconds (admission waits on plugins' Allocate).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Histogram

__all__ = ["ADMISSION_REQUESTS", "ADMISSION_ERRORS", "ADMISSION_DURATION", "observe_admission"]

ADMISSION_REQUESTS = Counter(
    "hwagent_topology_manager_admission_requests_total",
    "Pod admissions the topology manager handled.",
)
ADMISSION_ERRORS = Counter(
    "hwagent_topology_manager_admission_errors_total",
    "Pod admissions the topology manager refused or that failed in a hint provider.",
)
ADMISSION_DURATION = Histogram(
    "hwagent_topology_manager_admission_duration_seconds",
    "Time to admit a pod: hints, merge and every provider's allocation.",
    buckets=tuple(0.0005 * 2**i for i in range(16)),
)


@contextmanager
def observe_admission() -> Iterator[None]:
    """Count one request, its duration, and an error when the block raises."""
    ADMISSION_REQUESTS.inc()
    start = time.perf_counter()
    try:
        yield
    except BaseException:
        ADMISSION_ERRORS.inc()
        raise
    finally:
        ADMISSION_DURATION.observe(time.perf_counter() - start)
