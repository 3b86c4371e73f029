"""One ``POD_DIRECTORY`` however many fronts name pods: the NRI runtime, the kubelet, Slurm.

Each front that knows who runs in which cgroup publishes a ``PodDirectorySource``
(``agent.contracts``). On a node where two of them run (the upstream kubelet
with containerd's NRI: both name the same pods, the runtime exactly, the kubelet
through its kubepods tree, pod-resources and log layout, and only the kubelet
knows which device each holds) every view must still ask one directory, so a
second publisher joins the first instead of replacing it:
:func:`publish_pod_directory`.

The join (:class:`JoinedPodDirectorySource`) keeps the earlier publisher's word
for a cgroup both name (the daemon starts the NRI front before the kubelet's
directory: the runtime's own names win) and adds what only the later one knows
(its other containers, its device holders, its pod names). It is rebuilt only
when either side's value changed, so the pressure tick and the metrics scrape
pay nothing per call.
"""

from __future__ import annotations

from agent.contracts import POD_DIRECTORY, DaemonContext, PodDirectorySource
from agent.contracts.poddirectory import PodDirectory
from agent.contracts.pressure import Container

__all__ = ["JoinedPodDirectorySource", "join_directories", "publish_pod_directory"]


def join_directories(first: PodDirectory, second: PodDirectory) -> PodDirectory:
    """``first``'s containers, devices and pod names, then ``second``'s where ``first`` has none (pure)."""
    have = {c.cgroup for c in first.containers}
    containers = first.containers + tuple(c for c in second.containers if c.cgroup not in have)
    devices = {**second.devices, **first.devices}
    pods = {**second.pods, **first.pods}
    source = " + ".join(s for s in (first.source, second.source) if s)
    return PodDirectory(containers, devices, pods, source=source, at=max(first.at, second.at))


class JoinedPodDirectorySource:
    """Two sources as one (``first``'s word wins where both name a cgroup)."""

    def __init__(self, first: PodDirectorySource, second: PodDirectorySource) -> None:
        self.first = first
        self.second = second
        self._parts: tuple[PodDirectory, PodDirectory] | None = None
        self._joined = PodDirectory()

    @property
    def current(self) -> PodDirectory:
        parts = (self.first.current, self.second.current)
        if self._parts is None or parts[0] is not self._parts[0] or parts[1] is not self._parts[1]:
            self._parts = parts
            self._joined = join_directories(*parts)
        return self._joined

    @property
    def last_error(self) -> str:
        return "; ".join(e for e in (self.first.last_error, self.second.last_error) if e)

    def containers_for_pressure(self) -> list[Container]:
        out = self.first.containers_for_pressure()
        have = {c.cgroup_path for c in out}
        return out + [c for c in self.second.containers_for_pressure() if c.cgroup_path not in have]


def publish_pod_directory(ctx: DaemonContext, source: PodDirectorySource) -> PodDirectorySource:
    """Publish ``source`` as ``POD_DIRECTORY``, joined behind whatever an earlier front published;
    returns what is published now."""
    earlier = ctx.lookup(POD_DIRECTORY)
    if earlier is None:
        ctx.publish(POD_DIRECTORY, source)
        return source
    joined = JoinedPodDirectorySource(earlier, source)
    ctx.withdraw(POD_DIRECTORY)
    ctx.publish(POD_DIRECTORY, joined)
    return joined
