"""The device health board: other parts of hwagent (pressure probes, admin
tools) mark devices Unhealthy/Healthy with a reason, by what they know (a
block MAJ:MIN, an interface name, a PCI address).

Published as ``DEVICE_HEALTH`` (``agent.contracts``). Marks are per source, so two
probes do not clear each other's verdicts: a device is Unhealthy while any
source holds a mark on it. The board does not know about gRPC; its owner
gives it a resolver (kind, key -> plugin device ids) and a callback that
pushes the new ListAndWatch snapshots.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import Counter

from agent.eventlog import get_logger

__all__ = ["HealthBoard", "HEALTH_CHANGES"]

log = get_logger("hwagent.deviceplugin")

HEALTH_CHANGES = Counter(
    "hwagent_builtin_plugin_health_changes_total",
    "Device health verdicts that changed a device's health, by resource and new health",
    ["resource", "health"],
)


class HealthBoard:
    def __init__(self, resolve: Callable[[str, str], list[tuple[str, str]]],
                 on_change: Callable[[set[str]], None]) -> None:
        #: (kind, key) -> [(resource, device id)] currently affected
        self._resolve = resolve
        self._on_change = on_change
        self._marks: dict[str, dict[str, str]] = {}  # device id -> source -> reason

    def set_health_for(self, kind: str, key: str, healthy: bool, reason: str, source: str) -> list[str]:
        """Mark the plugin devices that ``kind``/``key`` refers to; returns their ids
        (empty when nothing hwagent offers is behind that key)."""
        targets = self._resolve(kind, key)
        changed_resources: set[str] = set()
        for resource, dev_id in targets:
            was = self.health_of(dev_id)[0]
            marks = self._marks.setdefault(dev_id, {})
            if healthy:
                marks.pop(source, None)
                if not marks:
                    del self._marks[dev_id]
            else:
                marks[source] = reason
            now, why = self.health_of(dev_id)
            if now != was:
                changed_resources.add(resource)
                HEALTH_CHANGES.labels(resource, "Healthy" if now else "Unhealthy").inc()
                log.warning(
                    "device health changed", resource=resource, device=dev_id, health="Healthy" if now else "Unhealthy",
                    reason=reason, source=source, kind=kind, key=key,
                )
            else:
                log.info(
                    "device health mark", resource=resource, device=dev_id, healthy=healthy, reason=reason,
                    source=source, health_unchanged=why or "Healthy",
                )
        if not targets:
            log.info("device health no target", kind=kind, key=key, source=source)
        if changed_resources:
            self._on_change(changed_resources)
        return [d for _, d in targets]

    def health_of(self, dev_id: str) -> tuple[bool, str]:
        marks = self._marks.get(dev_id)
        if not marks:
            return True, ""
        return False, "; ".join(f"{s}: {r}" for s, r in sorted(marks.items()))

    def forget(self, keep: Iterable[str]) -> None:
        """Drop marks on devices that are gone (a re-plugged device starts clean)."""
        keep = set(keep)
        for d in [d for d in self._marks if d not in keep]:
            del self._marks[d]

    def targets(self, kind: str, key: str) -> list[tuple[str, str]]:
        """(resource, device id) of the plugin devices ``kind``/``key`` refers to (no marks set)."""
        return list(self._resolve(kind, key))
