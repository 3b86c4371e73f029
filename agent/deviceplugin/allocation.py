"""Request checks and the preferred-allocation choice, as pure functions.

The checks run before anything is handed out, so a bad request (unknown id,
duplicate, more devices than offered) is refused whole and changes nothing.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from agent.limits import LimitError, check_device_ids

__all__ = ["RequestError", "check_ids", "preferred", "NO_NUMA"]

#: group key of devices without NUMA affinity (the kubelet uses -1 likewise)
NO_NUMA = -1
#: beyond this many NUMA groups the exhaustive search gives way to a greedy one
_EXHAUSTIVE_GROUPS = 12


class RequestError(ValueError):
    """A request the plugin refuses. ``code`` is "invalid" or "not_found",
    mapped to INVALID_ARGUMENT / NOT_FOUND by the gRPC layer."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _few(ids: Sequence[str], n: int = 5) -> str:
    """At most ``n`` ids for a message: an error must not carry a whole request back."""
    shown = ", ".join(ids[:n])
    return shown if len(ids) <= n else f"{shown} ... ({len(ids)} in all)"


def check_ids(ids: Sequence[str], known: Iterable[str], what: str = "devices_ids") -> None:
    """Refuse over-long ids, duplicates and ids the plugin does not have."""
    try:
        check_device_ids(ids)
    except LimitError as e:
        raise RequestError("invalid", f"{what}: {e}") from None
    known = set(known)
    dups = sorted(i for i, count in Counter(ids).items() if count > 1)
    if dups:
        raise RequestError("invalid", f"{what} lists {_few(dups)} more than once")
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise RequestError("not_found", f"{what} names unknown device(s) {_few(unknown)}")


def preferred(available: Sequence[str], must_include: Sequence[str], size: int,
              numa_of: Mapping[str, int | None], known: Iterable[str]) -> list[str]:
    """Choose ``size`` devices from ``available``, all of ``must_include``
    first, spanning as few NUMA nodes as possible.

    Devices without NUMA affinity form one group of their own. Among choices
    with equally few groups, the groups already needed by ``must_include`` are
    used first, then lower node ids; within a group, ids in sorted order.
    """
    _check_preferred(available, must_include, size, known)

    def group(dev: str) -> int:
        n = numa_of.get(dev)
        return NO_NUMA if n is None else n

    must = list(must_include)
    must_set = set(must)
    need = size - len(must)
    pools: dict[int, list[str]] = {}
    for d in sorted(available):
        if d not in must_set:
            pools.setdefault(group(d), []).append(d)
    if need == 0:
        return must
    base = sorted({group(d) for d in must})
    return must + _fewest_groups(pools, base, need)


def _check_preferred(available: Sequence[str], must_include: Sequence[str], size: int, known: Iterable[str]) -> None:
    """A GetPreferredAllocation request that can be answered, else RequestError."""
    check_ids(available, known, "available_deviceIDs")
    check_ids(must_include, available, "must_include_deviceIDs")
    if size <= 0:
        raise RequestError("invalid", f"allocation_size must be positive, got {size}")
    if size > len(available):
        raise RequestError("invalid", f"allocation_size {size} is more than the {len(available)} available devices")
    if len(must_include) > size:
        raise RequestError("invalid", f"must_include_deviceIDs has {len(must_include)} devices, more than "
                                      f"allocation_size {size}")


def _fewest_groups(pools: Mapping[int, list[str]], base: Sequence[int], need: int) -> list[str]:
    """``need`` devices from ``pools`` (group -> sorted free ids): from the ``base`` groups first,
    then from as few other groups as possible (every combination when there are few, else the
    biggest groups first)."""
    others = sorted(g for g in pools if g not in base)

    def fill(groups: Sequence[int]) -> list[str] | None:
        picked: list[str] = []
        for g in groups:
            picked.extend(pools.get(g, ())[: need - len(picked)])
            if len(picked) == need:
                return picked
        return picked if len(picked) == need else None

    chosen = fill(base)
    if chosen is None:
        if len(others) <= _EXHAUSTIVE_GROUPS:
            for r in range(1, len(others) + 1):
                for combo in itertools.combinations(others, r):
                    chosen = fill(list(base) + sorted(combo, key=lambda g: -len(pools[g])))
                    if chosen is not None:
                        break
                if chosen is not None:
                    break
        else:  # greedy: biggest groups first
            chosen = fill(list(base) + sorted(others, key=lambda g: (-len(pools[g]), g)))
    assert chosen is not None  # size <= len(available) guarantees a fill
    return chosen
