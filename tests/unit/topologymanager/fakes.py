"""A fake hint provider whose plan is a dict, so what a decision placed is observable."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agent.topologymanager import ProviderHints
from agent.contracts.hints import TopologyHint


def H(nodes: Sequence[int] | None, preferred: bool = True) -> TopologyHint:
    return TopologyHint(None if nodes is None else frozenset(nodes), preferred)


@dataclass
class Pod:
    uid: str


class ProviderFailure(RuntimeError):
    pass


@dataclass
class FakeProvider:
    """Places a resource per container in its plan; remembers what it placed where.

    ``hints`` maps container -> that container's hints; ``pod_level`` is what
    pod_hints returns. ``fail_place`` names containers whose placement raises
    (placing nothing), ``fail_hints`` containers whose hints raise.
    """

    name: str
    hints: Mapping[str, ProviderHints] = field(default_factory=dict)
    pod_level: ProviderHints = field(default_factory=dict)
    fail_place: frozenset[str] = frozenset()
    fail_hints: frozenset[str] = frozenset()
    placed: dict[tuple[str, str], TopologyHint] = field(default_factory=dict)
    calls: list[tuple] = field(default_factory=list)

    async def container_hints(self, pod: Pod, container: str) -> ProviderHints:
        self.calls.append(("container_hints", pod.uid, container))
        if container in self.fail_hints:
            raise ProviderFailure(f"{self.name}: hints for {container} failed")
        return self.hints.get(container, {})

    async def pod_hints(self, pod: Pod) -> ProviderHints:
        self.calls.append(("pod_hints", pod.uid))
        return self.pod_level

    async def place(self, pod: Pod, container: str, hint: TopologyHint) -> None:
        self.calls.append(("place", pod.uid, container, hint))
        if container in self.fail_place:
            raise ProviderFailure(f"{self.name}: place {container} failed")
        self.placed[(pod.uid, container)] = hint

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]
