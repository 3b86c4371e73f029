"""CEL device selectors, evaluated with cel-python (``celpy``), as the API
server's scheduler evaluates them: the expression sees ``device`` with
``driver``, ``attributes[domain][name]`` and ``capacity[domain][name]``, and
must give a bool.

Expressions are compiled once per text (a bounded cache: a claim's selectors
are evaluated against every device of the node). An expression that does not
compile, gives a non-bool, or fails on a device (a missing attribute without
``has()``) is a ``CELError``: upstream fails the allocation then rather than
skipping the device, and so does hwagent.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from agent.dra.claims import ClaimError

__all__ = ["CELError", "check", "matches", "device_activation"]


class CELError(ClaimError):
    """A selector that does not compile, or fails or gives no bool on a device."""


@functools.cache
def _env() -> Any:
    import celpy  # imported on first use: the daemon starts without it

    return celpy.Environment()


@functools.lru_cache(maxsize=512)
def _program(expression: str) -> Any:
    env = _env()
    try:
        return env.program(env.compile(expression))
    except Exception as e:  # noqa: BLE001 - celpy's parse errors share no base class worth naming
        raise CELError(f"CEL expression {expression[:200]!r} does not compile: {e}") from None


def check(expression: str) -> None:
    """Compile ``expression`` (``CELError`` when it does not), so a file is refused when read."""
    _program(expression)


def device_activation(driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, int]) -> dict[str, Any]:
    """The ``device`` variable for qualified attribute and capacity names (``domain/name``)."""
    import celpy

    def nest(flat: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for q, v in flat.items():
            domain, _, ident = q.rpartition("/")
            out.setdefault(domain or driver, {})[ident] = v
        return out

    return {"device": celpy.json_to_cel({
        "driver": driver, "attributes": nest(attributes), "capacity": nest(capacity),
        "allowMultipleAllocations": False,
    })}


def matches(expression: str, activation: Mapping[str, Any], device: str = "") -> bool:
    """Whether the device (``device_activation``) satisfies ``expression``."""
    prg = _program(expression)
    try:
        out = prg.evaluate(dict(activation))
    except Exception as e:  # noqa: BLE001 - celpy raises its own error types and Python's
        raise CELError(f"CEL expression {expression[:200]!r} failed on device {device}: {e}") from None
    if isinstance(out, Exception):  # celpy may return its error value instead of raising
        raise CELError(f"CEL expression {expression[:200]!r} failed on device {device}: {out}")
    if not isinstance(out, bool):  # celpy's BoolType subclasses int, not bool
        from celpy import celtypes

        if not isinstance(out, celtypes.BoolType):
            raise CELError(f"CEL expression {expression[:200]!r} gave {type(out).__name__} on device {device}, "
                           "not a bool")
    return bool(out)
