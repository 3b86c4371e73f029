"""The topology manager: ask the hint providers, merge, allocate, roll back.

It owns no resource state: the providers (the CPU policy, the device manager,
later memory) do. What it adds is the order of calls the kubelet makes and, on
top of the kubelet, the rollback: when a refusal or any provider's failure
stops an admission half way, every provider is told to release what it
allocated for the pod, so an admission that fails leaves nothing behind.
"""

from __future__ import annotations

import asyncio
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

#: what every container gets under the policy "none"
ANY_HINT = TopologyHint(None, True)


class HintProvider(Protocol[P_contra]):
    """A resource owner that can say where it could allocate, then allocate there.

    ``pod`` is whatever object the caller admits; the topology manager never
    looks inside it.
    """

    name: str

    async def container_hints(self, pod: P_contra, container: str) -> ProviderHints:
        """Hints for one container (container scope)."""

    async def pod_hints(self, pod: P_contra) -> ProviderHints:
        """Hints for the whole pod (pod scope)."""

    async def allocate(self, pod: P_contra, container: str, hint: TopologyHint) -> None:
        """Allocate the container's resources inside ``hint``; raise on failure
        (having allocated nothing for that call)."""

    async def release(self, pod: P_contra) -> None:
        """Undo every allocation made for this pod; a no-op when there is none
        (it is called on every provider during a rollback, also on those that
        allocated nothing yet)."""


class TopologyManager:
    """Aligns a pod's resources from all hint providers on NUMA nodes.

    Admissions are serialised by a lock, as in the kubelet (which admits one pod
    at a time), so two pods never see the same free resources in their hints.
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
        self._lock = asyncio.Lock()

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

    async def admit(
        self, pod: P, containers: Sequence[str], providers: Sequence[HintProvider[P]]
    ) -> dict[str, TopologyHint]:
        """Align and allocate every container, in the given order; all or nothing.

        Returns container -> the hint its resources were allocated in. Raises
        TopologyAffinityError when the policy refuses, or whatever a provider
        raised; in both cases every provider's ``release(pod)`` has run first.
        """
        names = list(containers)
        dupes = sorted({c for c in names if names.count(c) > 1})
        if dupes:
            raise ValueError(f"container names must be unique within a pod, repeated: {', '.join(dupes)}")
        async with self._lock:
            with observe_admission():
                try:
                    return await self._admit(pod, names, providers)
                except BaseException:
                    await self._rollback(pod, providers)
                    raise

    async def _admit(self, pod: P, containers: list[str], providers: Sequence[HintProvider[P]]) -> dict[str, TopologyHint]:
        result: dict[str, TopologyHint] = {}
        if self.config.policy == "none":
            # the kubelet's none scope still allocates every container, without hints
            for container in containers:
                await self._allocate(pod, container, ANY_HINT, providers)
                result[container] = ANY_HINT
            return result
        if self.config.scope == "pod":
            hints = [await p.pod_hints(pod) for p in providers]
            hint = self._decide(hints, "pod")
            for container in containers:
                await self._allocate(pod, container, hint, providers)
                result[container] = hint
            return result
        for container in containers:
            hints = [await p.container_hints(pod, container) for p in providers]
            hint = self._decide(hints, f"container {container!r}")
            await self._allocate(pod, container, hint, providers)
            result[container] = hint
        return result

    def _decide(self, hints: Sequence[ProviderHints], what: str) -> TopologyHint:
        decision = self.merge(hints)
        if not decision.admit:
            log.info("topology affinity refused", what=what, reason=decision.reason)
            raise TopologyAffinityError(f"{what}: {decision.reason}", decision.resource, decision.tried)
        log.debug("topology affinity aligned", what=what, hint=decision.hint)
        return decision.hint

    @staticmethod
    async def _allocate(pod: P, container: str, hint: TopologyHint, providers: Sequence[HintProvider[P]]) -> None:
        for provider in providers:
            await provider.allocate(pod, container, hint)

    @staticmethod
    async def _rollback(pod: P, providers: Sequence[HintProvider[P]]) -> None:
        for provider in providers:
            try:
                await provider.release(pod)
            except Exception:
                log.exception("rollback release failed", provider=getattr(provider, "name", provider))
