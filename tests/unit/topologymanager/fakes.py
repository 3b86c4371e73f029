"""A fake hint provider that owns real (tiny) state, so rollback is observable."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agent.topologymanager import ProviderHints, TopologyHint


def H(nodes: Sequence[int] | None, preferred: bool = True) -> TopologyHint:
    return TopologyHint(None if nodes is None else frozenset(nodes), preferred)


@dataclass
class Pod:
    uid: str


class ProviderFailure(RuntimeError):
    pass


@dataclass
class FakeProvider:
    """Hands out a resource per container; remembers what it gave whom.

    ``hints`` maps container -> that container's hints; ``pod_level`` is what
    pod_hints returns. ``fail_allocate`` names containers whose allocate raises
    (after allocating nothing), ``fail_release`` makes release raise after
    releasing.
    """

    name: str
    hints: Mapping[str, ProviderHints] = field(default_factory=dict)
    pod_level: ProviderHints = field(default_factory=dict)
    fail_allocate: frozenset[str] = frozenset()
    fail_hints: frozenset[str] = frozenset()
    fail_release: bool = False
    allocated: dict[tuple[str, str], TopologyHint] = field(default_factory=dict)
    calls: list[tuple] = field(default_factory=list)

    async def container_hints(self, pod: Pod, container: str) -> ProviderHints:
        self.calls.append(("container_hints", pod.uid, container))
        if container in self.fail_hints:
            raise ProviderFailure(f"{self.name}: hints for {container} failed")
        return self.hints.get(container, {})

    async def pod_hints(self, pod: Pod) -> ProviderHints:
        self.calls.append(("pod_hints", pod.uid))
        return self.pod_level

    async def allocate(self, pod: Pod, container: str, hint: TopologyHint) -> None:
        self.calls.append(("allocate", pod.uid, container, hint))
        if container in self.fail_allocate:
            raise ProviderFailure(f"{self.name}: allocate {container} failed")
        self.allocated[(pod.uid, container)] = hint

    async def release(self, pod: Pod) -> None:
        self.calls.append(("release", pod.uid))
        for key in [k for k in self.allocated if k[0] == pod.uid]:
            del self.allocated[key]
        if self.fail_release:
            raise ProviderFailure(f"{self.name}: release failed")

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]
