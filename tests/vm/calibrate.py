"""How much slower this guest runs than the host that booted it, measured, not assumed.

The host times a fixed pure-Python loop just before it boots a guest and passes the
figure in ($HWAGENT_VM_HOST_LOOP_S); the guest times the same loop. Their ratio turns
a host-side budget ("the probes attach within 3 s here") into the guest's, so a test
under TCG on a loaded machine waits as long as that machine needs, and no test asserts
a duration.
"""

from __future__ import annotations

import os
import time

#: iterations of the reference loop (~0.1 s on the host, a few seconds under TCG)
LOOP_N = 2_000_000
#: margin on top of the measured ratio (the ratio itself moves with the host's load)
SAFETY = 3.0


def loop_seconds(n: int = LOOP_N, repeat: int = 3) -> float:
    """The best of ``repeat`` runs of a fixed pure-Python loop."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        acc = 0
        for i in range(n):
            acc += i
        best = min(best, time.perf_counter() - t0)
    return best


def slowdown(guest_loop_s: float | None = None) -> float:
    """Guest/host ratio of the reference loop (1.0 when the host gave no figure)."""
    host = float(os.environ.get("HWAGENT_VM_HOST_LOOP_S", "0") or 0)
    if host <= 0:
        return 1.0
    guest = loop_seconds() if guest_loop_s is None else guest_loop_s
    return max(1.0, guest / host)


def budget(host_seconds: float, ratio: float | None = None) -> float:
    """A host-side duration scaled to this guest, with the safety margin."""
    return host_seconds * (slowdown() if ratio is None else ratio) * SAFETY
