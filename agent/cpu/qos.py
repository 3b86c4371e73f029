"""QoS level and enhancement annotations (katalyst.kubewharf.io/*).

Parsing is strict where upstream is lenient: an unknown QoS value, a label that
disagrees with the annotation, an enhancement that is not a JSON object of
strings, or a boolean enhancement that is neither "true" nor "false" is an
INVALID_ARGUMENT. A typo in a placement annotation must not silently become
shared_cores.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.contracts.cpu import DEDICATED, RECLAIMED, SHARED, SYSTEM
from agent.cpu.errors import invalid

__all__ = [
    "QOS_KEY",
    "SHARED",
    "DEDICATED",
    "RECLAIMED",
    "SYSTEM",
    "QOS_LEVELS",
    "MEMORY_ENHANCEMENT_KEY",
    "CPU_ENHANCEMENT_KEY",
    "QoS",
    "parse_qos",
    "DEFAULT_POOL",
    "RESERVE_POOL",
    "RECLAIM_POOL",
    "DEDICATED_OWNER",
    "shown_pool",
]

QOS_KEY = "katalyst.kubewharf.io/qos_level"
MEMORY_ENHANCEMENT_KEY = "katalyst.kubewharf.io/memory_enhancement"
CPU_ENHANCEMENT_KEY = "katalyst.kubewharf.io/cpu_enhancement"

QOS_LEVELS = (SHARED, DEDICATED, RECLAIMED, SYSTEM)

DEFAULT_POOL = "share"
RESERVE_POOL = "reserve"
RECLAIM_POOL = "reclaim"
DEDICATED_OWNER = "dedicated"
#: names a cpuset_pool may not take: they mean something else in the pool model
RESERVED_POOL_NAMES = frozenset({RESERVE_POOL, RECLAIM_POOL, DEDICATED_OWNER, "fallback", ""})
_POOL_NAME = re.compile(r"^[a-z0-9]([a-z0-9_.-]{0,61}[a-z0-9])?$")

_BOOL_KEYS = frozenset({"numa_binding", "numa_exclusive"})
_ENHANCEMENT_KEYS = (MEMORY_ENHANCEMENT_KEY, CPU_ENHANCEMENT_KEY)


@dataclass(frozen=True)
class QoS:
    level: str
    numa_binding: bool = False
    numa_exclusive: bool = False
    cpuset_pool: str = DEFAULT_POOL
    #: the QoS-filtered maps upstream stores and echoes in responses
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


def _enhancements(annotations: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key in _ENHANCEMENT_KEYS:
        raw = annotations.get(key)
        if raw is None:
            continue
        try:
            obj = json.loads(raw)
        except (TypeError, ValueError) as e:
            raise invalid("bad_annotation", f"annotation {key} is not valid JSON: {e}") from None
        except RecursionError:
            # json's decoder recurses per nesting level; a flat object of strings never nests
            raise invalid("bad_annotation", f"annotation {key} is nested too deeply to be a JSON object of strings") from None
        if not isinstance(obj, dict):
            raise invalid("bad_annotation", f"annotation {key} must be a JSON object, got {type(obj).__name__}")
        for k, v in obj.items():
            if not isinstance(v, str):
                raise invalid("bad_annotation", f"annotation {key}: value of {k!r} must be a string, got {v!r}")
            out[k] = v
    return out


def parse_qos(
    annotations: Mapping[str, str],
    labels: Mapping[str, str],
    enhancement_defaults: Mapping[str, str] | None = None,
) -> QoS:
    ann_level = annotations.get(QOS_KEY)
    lab_level = labels.get(QOS_KEY)
    for where, v in (("annotation", ann_level), ("label", lab_level)):
        if v is not None and v not in QOS_LEVELS:
            raise invalid(
                "unknown_qos",
                f"{where} {QOS_KEY}={v!r} is not a known QoS level ({', '.join(QOS_LEVELS)})",
            )
    if ann_level is not None and lab_level is not None and ann_level != lab_level:
        raise invalid("unknown_qos", f"annotation and label {QOS_KEY} disagree: {ann_level!r} vs {lab_level!r}")
    level = ann_level or lab_level or SHARED

    kv = _enhancements(annotations)
    for k, v in (enhancement_defaults or {}).items():
        kv.setdefault(k, v)
    for k in _BOOL_KEYS:
        if k in kv and kv[k] not in ("true", "false"):
            raise invalid("bad_annotation", f"enhancement {k} must be \"true\" or \"false\", got {kv[k]!r}")
    binding = kv.get("numa_binding") == "true"
    exclusive = binding and kv.get("numa_exclusive") == "true"
    pool = kv.get("cpuset_pool", DEFAULT_POOL)
    if level == SHARED and (pool in RESERVED_POOL_NAMES or not _POOL_NAME.match(pool)):
        raise invalid("bad_annotation", f"cpuset_pool {pool!r} is not a usable pool name")
    filtered = {QOS_KEY: level, **kv}
    return QoS(
        level=level,
        numa_binding=binding,
        numa_exclusive=exclusive,
        cpuset_pool=pool,
        annotations=filtered,
        labels={QOS_KEY: level},
    )


def shown_pool(qos_level: str, owner_pool_name: str, ramp_up: bool, annotations: Mapping[str, str]) -> tuple[str, bool]:
    """The pool the views name for a container, and whether it is still joining it (pure).

    A shared container in ramp-up has no owner pool yet (for ``transition_period_s`` it runs
    on every CPU shared pods may use) and is named by the pool it joins when the ramp-up ends
    (its ``cpuset_pool``, else ``share``, as ``DynamicPolicy.complete_ramp_up`` decides), so a
    just-admitted pod does not read as in no pool. Every other container: its owner pool, not
    joining (a dedicated container's ramp-up flag moves nothing, quirk 14.5)."""
    if owner_pool_name or qos_level != SHARED or not ramp_up:
        return owner_pool_name, False
    return annotations.get("cpuset_pool") or DEFAULT_POOL, True
