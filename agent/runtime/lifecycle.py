"""Life-cycle decisions, as the kubelet makes them (pure).

restartPolicy applies to app containers: Always restarts any exit, OnFailure a
non-zero one, Never none. Init containers restart on failure unless the pod's
policy is Never (the kubelet treats Always as OnFailure for them). The pod's
phase follows from its containers' last states.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.contracts.pods import ContainerState, ContainerStatus, PodPhase

__all__ = ["should_restart", "should_restart_init", "app_phase", "exit_reason", "remaining_grace", "pod_end_time"]


def should_restart(policy: str, exit_code: int) -> bool:
    if policy == "Always":
        return True
    if policy == "OnFailure":
        return exit_code != 0
    return False


def should_restart_init(policy: str, exit_code: int) -> bool:
    return exit_code != 0 and policy != "Never"


def remaining_grace(deadline: float | None, grace_s: float | None, now: float) -> float:
    """What is left of a stop's grace period when a restarted daemon resumes it.

    A workload that was told to stop keeps the time it was promised, not a fresh
    period and not none. A record without a deadline (written before deadlines were
    kept) gets none, as before; a wall clock that jumped back cannot stretch the
    wait beyond the period the stop was given.
    """
    if deadline is None or grace_s is None:
        return 0.0
    return min(max(0.0, deadline - now), max(0.0, grace_s))


def exit_reason(exit_code: int, signaled: int | None = None, oom: bool = False) -> str:
    if oom:
        return "OOMKilled"
    return "Completed" if exit_code == 0 and signaled is None else "Error"


def app_phase(policy: str, statuses: Sequence[ContainerStatus]) -> PodPhase | None:
    """The terminal phase once no app container will run again, else None.
    ``statuses``: every app container's, after restart decisions were made
    (a container that will restart is not TERMINATED here)."""
    if not statuses or any(s.state != ContainerState.TERMINATED for s in statuses):
        return None
    if all(s.exit_code == 0 for s in statuses):
        return PodPhase.SUCCEEDED
    return PodPhase.FAILED


def pod_end_time(statuses: Sequence[ContainerStatus], now: float) -> float:
    """When a pod that ends now ended: the last of its app containers' recorded ends (each the time
    of the shim's exit record, ``ContainerFiles.exit``), so a pod whose containers ended while the
    daemon was down ends then, not at the restart that noticed it; ``now`` when a container has no
    recorded end (it was killed by the stop now ending the pod) or none is an app container."""
    ends = [s.finished_at for s in statuses if s.state == ContainerState.TERMINATED]
    if not statuses or len(ends) != len(statuses) or any(t is None for t in ends):
        return now
    return min(now, max(t for t in ends if t is not None))
