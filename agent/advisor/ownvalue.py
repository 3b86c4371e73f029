"""A cgroup value the advisor sets on reclaimed pods' cgroups and gives back.

The CPU quota (suppress.py) and ``memory.high`` (memhigh.py) follow one rule: the value a
cgroup had before the advisor's first write is its own; it is read once, kept (state.json
carries it across a crash), never loosened by a planned value, and put back when the plan
no longer names the cgroup, the plan says None, or the advisor stops. A cgroup that
vanished (its pod ended) is forgotten, not an error. Subclasses say how to read, bound and
write one knob; the bookkeeping is here once. Runs in a worker thread (file I/O); an
instance is touched only by the thread that applies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, TypeVar

from agent.cgroups.fs import CgroupVanished
from agent.eventlog import get_logger

__all__ = ["OwnValueWriter"]

log = get_logger("hwagent.advisor")

#: a cgroup's own value, as read (and written back)
Own = TypeVar("Own")
#: a planned value
V = TypeVar("V")


class OwnValueWriter(Generic[Own, V]):
    """Writes planned values, remembering each cgroup's own value before its first write."""

    #: the knob's name in log lines ("cpu quota", "memory.high")
    knob = ""
    #: the own value put back for a cgroup that has none recorded
    unset: Own

    def __init__(self, originals: Mapping[str, Own] | None = None) -> None:
        #: pod cgroup -> its own value before the advisor wrote it
        self.originals: dict[str, Own] = dict(originals or {})
        #: pod cgroup -> the planned value in force (after bounding by the own value)
        self.applied: dict[str, V] = {}

    def _read(self, rel: str) -> Own:
        raise NotImplementedError

    def _bounded(self, want: V, own: Own) -> V:
        """``want``, never looser than the cgroup's own value."""
        raise NotImplementedError

    def _write(self, rel: str, value: V) -> bool:
        """Write a planned value; whether the file changed."""
        raise NotImplementedError

    def _put_back(self, rel: str, own: Own) -> bool:
        """Write the own value back; whether the file changed."""
        raise NotImplementedError

    def apply(self, plan: Mapping[str, V | None]) -> list[str]:
        """Make ``plan`` true (None: this cgroup's own value); cgroups it no longer names get
        their own value back. The cgroups written."""
        written: list[str] = []
        for rel in sorted(set(self.originals) - set(plan)):
            self._restore(rel, written)
        for rel, want in sorted(plan.items()):
            try:
                if want is None:
                    if rel in self.originals:
                        self._restore(rel, written)
                    continue
                if rel not in self.originals:
                    self.originals[rel] = self._read(rel)
                value = self._bounded(want, self.originals[rel])
                if self._write(rel, value):
                    written.append(rel)
                self.applied[rel] = value
            except CgroupVanished:
                self.originals.pop(rel, None)
                self.applied.pop(rel, None)
            except (OSError, ValueError) as e:
                log.warning("advisor cgroup write failed", knob=self.knob, path=rel, error=str(e))
        return written

    def _restore(self, rel: str, written: list[str]) -> None:
        own = self.originals.pop(rel, self.unset)
        self.applied.pop(rel, None)
        try:
            if self._put_back(rel, own):
                written.append(rel)
        except CgroupVanished:
            pass
        except OSError as e:
            log.warning("advisor cgroup restore failed", knob=self.knob, path=rel, error=e.strerror)

    def release(self) -> list[str]:
        """Every cgroup back to its own value (the advisor stops, or the option is off: nobody
        would lift what it set)."""
        return self.apply({})
