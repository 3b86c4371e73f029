"""CPU request quantity parsing (upstream GetQuantityFromResourceReq rules).

Exactly one key: ``cpu`` (cores, may be fractional) or the reclaimed milli-CPU
extended resource (divided by 1000). The integer quantity is ceil(x). Unlike
upstream, negative, NaN and infinite values are rejected rather than clamped:
a negative CPU request is always a client bug.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from agent.cpu.errors import invalid

__all__ = ["RESOURCE_CPU", "RESOURCE_RECLAIMED_MILLICPU", "parse_request", "ceil_cpus"]

RESOURCE_CPU = "cpu"
RESOURCE_RECLAIMED_MILLICPU = "resource.katalyst.kubewharf.io/reclaimed_millicpu"
_SCALE = {RESOURCE_CPU: 1.0, RESOURCE_RECLAIMED_MILLICPU: 1000.0}


def parse_request(requests: Mapping[str, float]) -> float:
    """The requested number of CPUs as a float (cores)."""
    keys = list(requests)
    if len(keys) != 1:
        raise invalid(
            "bad_resource_keys",
            f"resource_requests must hold exactly one key (cpu or {RESOURCE_RECLAIMED_MILLICPU}), "
            f"got {sorted(keys) or 'none'}",
        )
    key = keys[0]
    if key not in _SCALE:
        raise invalid("bad_resource_keys", f"resource key {key!r} is not handled by the cpu plugin")
    value = requests[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid("bad_quantity", f"quantity of {key} must be a number, got {value!r}")
    if math.isnan(value) or math.isinf(value):
        raise invalid("bad_quantity", f"quantity of {key} must be finite, got {value!r}")
    if value < 0:
        raise invalid("bad_quantity", f"quantity of {key} must not be negative, got {value!r}")
    return float(value) / _SCALE[key]


def ceil_cpus(request: float) -> int:
    """Whole CPUs for a fractional request; tolerant of float noise (2.0000000001 -> 2)."""
    return int(math.ceil(round(request, 6)))
