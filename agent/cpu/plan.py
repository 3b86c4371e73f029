"""The CPU policy's state copied for one admission decision (``agent.contracts.CPUPlanner``).

Admission places every container of a pod on the copy, so the later containers
see the earlier ones and nothing live changes; it then commits exactly the
requests the plan recorded. The computation is the policy's own
(``DynamicPolicy.hints_in``/``plan``), so a dry run and an admission agree.
"""

from __future__ import annotations

from agent.contracts.cpu import AllocateResult, Request
from agent.contracts.hints import TopologyHint
from agent.cpu.policy import DynamicPolicy
from agent.cpuset import CPUSet

__all__ = ["PolicyPlan"]


class PolicyPlan:
    def __init__(self, policy: DynamicPolicy) -> None:
        self._policy = policy
        self._state = policy.state

    def hints(self, req: Request) -> list[TopologyHint] | None:
        """The policy's hints on the copy (PolicyError as the policy raises it)."""
        return self._policy.hints_in(self._state, req).hints

    def allocate(self, req: Request) -> AllocateResult:
        """What the policy's allocate would give, recorded in the copy only."""
        res, after = self._policy.plan(self._state, req)
        if after is not None:
            self._state = after
        return res

    def shared_cpus(self) -> CPUSet:
        return self._policy.shared_cpus(self._state)
