"""The topology manager: ask the hint providers, merge, place.

It owns no resource state: the providers (the CPU policy, the device manager,
later memory) do. What it adds is the order of calls the kubelet makes: per
scope, whose hints are asked, merged under the policy, and which hint each
container is placed in. ``decide`` is the one place that order (and the scope
switch) lives; the providers it is given place containers in a *plan*, a
private copy of their state, so a decision changes nothing. Admission calls it
for a dry run and for an admission alike and commits what the plan holds; it
serialises admissions itself, so no lock is needed here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from agent.eventlog import get_logger
from .config import TopologyManagerConfig
from .hints import Decision, ProviderHints, TopologyAffinityError, TopologyHint
from .merge import merge_hints
from .metrics import observe_admission
from .numa import NUMAInfo

if TYPE_CHECKING:
    from agent.topology.model import Topology

__all__ = ["HintProvider", "TopologyManager", "ANY_HINT"]

log = get_logger("hwagent.topologymanager")

P = TypeVar("P")
P_contra = TypeVar("P_contra", contravariant=True)

#: what every container gets under the policy "none": the kubelet's empty
#: TopologyHint (no affinity, not preferred)
ANY_HINT = TopologyHint(None, False)


class HintProvider(Protocol[P_contra]):
    """A resource owner's plan for one decision: where it could place a
    container, and placing it there (in the plan, not in the live state).

    ``pod`` is whatever object the caller decides on; the topology manager never
    looks inside it. Hints are asked against the plan as the earlier
    containers left it.
    """

    name: str

    async def container_hints(self, pod: P_contra, container: str) -> ProviderHints:
        """Hints for one container (container scope)."""

    async def pod_hints(self, pod: P_contra) -> ProviderHints:
        """Hints for the whole pod (pod scope)."""

    async def place(self, pod: P_contra, container: str, hint: TopologyHint) -> None:
        """Place the container's resources inside ``hint`` in the plan; raise
        when they cannot be (the refusal the allocation itself would give)."""


class TopologyManager:
    """Aligns a pod's resources from all hint providers on NUMA nodes.

    Holds no state but its configuration: its caller (admission) serialises
    admissions, as the kubelet admits pods one at a time, so two pods never see
    the same free resources in their hints.
    """

    def __init__(
        self,
        config: TopologyManagerConfig,
        numa_nodes: Sequence[int],
        distances: Mapping[int, Mapping[int, int]] | None = None,
    ) -> None:
        config.validate()
        if config.policy != "none" and len(set(numa_nodes)) > config.max_allowable_numa_nodes:
            # the kubelet refuses to start: the hint cross product explodes beyond that
            raise ValueError(
                f"topology manager policy {config.policy!r} is unsupported on machines with more than "
                f"{config.max_allowable_numa_nodes} NUMA nodes (this one has {len(set(numa_nodes))}); "
                f"raise max_allowable_numa_nodes or use the policy 'none'"
            )
        self.config = config
        self.numa = NUMAInfo.build(
            list(numa_nodes), distances, config.prefer_closest_numa_nodes and config.policy != "none"
        )

    @classmethod
    def for_topology(cls, config: TopologyManagerConfig, topology: Topology) -> TopologyManager:
        """The manager for a machine as ``agent.topology`` read it: every NUMA node
        (memory-only ones included, as the kubelet's cadvisor topology has them) and
        the distance matrix from sysfs."""
        nodes = [n.id for n in topology.numa_nodes]
        return cls(config, nodes, {n.id: dict(n.distances) for n in topology.numa_nodes})

    @property
    def policy(self) -> str:
        return self.config.policy

    @property
    def scope(self) -> str:
        return self.config.scope

    def merge(self, hints: Sequence[ProviderHints]) -> Decision:
        """The policy's decision for one set of provider hints (no side effects)."""
        if self.config.policy == "none":
            return Decision(ANY_HINT, True)
        return merge_hints(self.config.policy, self.numa, hints)

    async def decide(
        self, pod: P, containers: Sequence[str], providers: Sequence[HintProvider[P]], *, count: bool = True
    ) -> dict[str, TopologyHint]:
        """Align and place every container, in the given order, in the providers' plans.

        Returns container -> the hint it is placed in. Raises
        TopologyAffinityError when the policy refuses (naming the container, or
        "pod"), or whatever a provider raised. Changes nothing outside the plans.
        ``count``: in the admission metrics (a dry run is not an admission).
        """
        names = list(containers)
        dupes = sorted({c for c in names if names.count(c) > 1})
        if dupes:
            raise ValueError(f"container names must be unique within a pod, repeated: {', '.join(dupes)}")
        if not count:
            return await self._decide_all(pod, names, providers)
        with observe_admission():
            return await self._decide_all(pod, names, providers)

    async def _decide_all(
        self, pod: P, containers: list[str], providers: Sequence[HintProvider[P]]
    ) -> dict[str, TopologyHint]:
        result: dict[str, TopologyHint] = {}
        if self.config.policy == "none":
            # the kubelet's none policy still places every container, without asking hints
            for container in containers:
                await self._place(pod, container, ANY_HINT, providers)
                result[container] = ANY_HINT
            return result
        if self.config.scope == "pod":
            hint = self._aligned([await p.pod_hints(pod) for p in providers], "pod")
            for container in containers:
                await self._place(pod, container, hint, providers)
                result[container] = hint
            return result
        for container in containers:
            hints = [await p.container_hints(pod, container) for p in providers]
            hint = self._aligned(hints, f"container {container!r}")
            await self._place(pod, container, hint, providers)
            result[container] = hint
        return result

    def _aligned(self, hints: Sequence[ProviderHints], what: str) -> TopologyHint:
        decision = self.merge(hints)
        if not decision.admit:
            log.info("topology affinity refused", what=what, reason=decision.reason)
            raise TopologyAffinityError(f"{what}: {decision.reason}", decision.resource, decision.tried)
        log.debug("topology affinity aligned", what=what, hint=decision.hint)
        return decision.hint

    @staticmethod
    async def _place(pod: P, container: str, hint: TopologyHint, providers: Sequence[HintProvider[P]]) -> None:
        for provider in providers:
            await provider.place(pod, container, hint)
