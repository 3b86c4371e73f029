"""Shared pods that request more CPU than they may run on: admitted, and said (pure).

The decision (issue 37 item 13): hwagent keeps Katalyst's rule for shared_cores. Their
pool is sized from their requests, but a request is a weight for CPU time (``cpu.shares``),
not a reservation; pods beyond the pool's CPUs are admitted and share them, as the kubelet
admits Burstable pods onto its shared pool. Refusing them would make a one-socket box with
one dedicated job refuse every service past its last idle CPU, which is not what either
peer does. What was wrong was the silence: the admission that overcommits says so, and
``hwagent explain pool`` shows it (docs/cpu-policy.md, "Shared requests are not
reservations"). Import-light: the CLI's explain uses it.
"""

from __future__ import annotations

__all__ = ["overcommit_note"]


def _cpus(n: float) -> str:
    text = f"{n:.3f}".rstrip("0").rstrip(".")
    return f"{text} CPU" + ("" if text == "1" else "s")


def overcommit_note(requested: float, cpus: int) -> str | None:
    """The line a user reads when the shared pods' requests (``requested``, in CPUs, all of
    them) exceed the ``cpus`` they may run on; None when they fit."""
    if round(requested, 3) <= cpus:
        return None
    return (f"shared pods request {_cpus(requested)} in all, more than the {_cpus(cpus)} they may run on: "
            "admitted, as Katalyst admits shared_cores (a shared request is a weight for CPU time, not a "
            "reservation), so they share those CPUs and may wait for them; for CPUs of its own a pod needs "
            "--qos dedicated (docs/cpu-policy.md)")
