"""Life-cycle decisions, as the kubelet makes them (pure).

restartPolicy applies to app containers: Always restarts any exit, OnFailure a
non-zero one, Never none. Init containers restart on failure unless the pod's
policy is Never (the kubelet treats Always as OnFailure for them). The pod's
phase follows from its containers' last states.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.workloads.model import ContainerState, ContainerStatus, PodPhase

__all__ = ["should_restart", "should_restart_init", "app_phase", "exit_reason"]


def should_restart(policy: str, exit_code: int) -> bool:
    if policy == "Always":
        return True
    if policy == "OnFailure":
        return exit_code != 0
    return False


def should_restart_init(policy: str, exit_code: int) -> bool:
    return exit_code != 0 and policy != "Never"


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
