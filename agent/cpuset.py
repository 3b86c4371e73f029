"""CPUSet: an immutable set of CPU (or NUMA node) ids in the kernel's list format.

The kernel speaks two dialects for the same thing: list format ("0-3,8,10-11",
used by cpuset.cpus, node/cpulist, cpus_allowed_list) and hex mask format
("ff,00000f0f", used by cpumap and shared_cpu_map). Every part of hwagent that
crosses the kernel boundary needs both, and needs them strict: a cpuset string
that silently parses to the wrong set pins a workload to the wrong CPUs.
"""

from __future__ import annotations

#: collections.abc (and re, imported where a text is parsed) are left out at import: the CLI prints
#: CPUSets (ps, launch) and each is ~1.5 ms of its start-up (tests/unit/test_cli_imports.py); mypy reads this
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["CPUSet", "CPUSetError", "MAX_ID"]

#: Largest id accepted. The kernel's NR_CPUS tops out at 8192 and MAX_NUMNODES
#: at 1024; anything far above that is a typo or hostile input, and would make a
#: range like "0-4294967295" allocate billions of ints.
MAX_ID = 65535

#: the patterns of a list element and a mask word (compiled once, by re's own cache, on first use)
_RANGE = r"^(\d+)(?:-(\d+))?$"
_HEXWORD = r"^[0-9a-fA-F]{1,8}$"


#: texts parsed lately -> their CPUSet (see ``CPUSet.parse``)
_PARSED: dict[str, CPUSet] = {}
_PARSED_MAX = 512


class CPUSetError(ValueError):
    """A cpu/node list or mask that is not valid Linux syntax."""


class CPUSet:
    """Immutable, hashable, ordered set of non-negative ids.

    Supports the set algebra the CPU policy needs (``|``, ``&``, ``-``, ``^``,
    comparisons), iteration in ascending order, and round trips through the
    canonical list format (``str(cs)``).
    """

    __slots__ = ("_ids", "_sorted")

    def __init__(self, ids: Iterable[int] = ()) -> None:
        s: set[int] = set()
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int):
                raise CPUSetError(f"cpu id must be an int, got {i!r}")
            if i < 0 or i > MAX_ID:
                raise CPUSetError(f"cpu id {i} out of range 0-{MAX_ID}")
            s.add(i)
        self._ids: frozenset[int] = frozenset(s)
        self._sorted: tuple[int, ...] = tuple(sorted(s))

    # -- construction -------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> CPUSet:
        """Parse list format ("0-3,8"). Whitespace around the whole string and a
        trailing newline (as read from sysfs) are accepted; an empty string is
        the empty set, as in an empty ``cpuset.cpus``.

        Equal texts give one shared object (a CPUSet is immutable): a checkpoint
        names the same pool cpuset once per member, and a restart with 10,000
        members held 10,000 copies of it (73 MB) where the running policy holds
        one by reference (issue 24). The cache is small and bounded; errors are
        not cached."""
        if not isinstance(text, str):
            raise CPUSetError(f"cpu list must be a string, got {type(text).__name__}")
        if cls is not CPUSet:
            return cls._parse(text)
        hit = _PARSED.get(text)
        if hit is None:
            hit = cls._parse(text)
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.pop(next(iter(_PARSED)))  # oldest first: a bounded, insertion-ordered cache
            _PARSED[text] = hit
        return hit

    @classmethod
    def _parse(cls, text: str) -> CPUSet:
        body = text.strip()
        if body == "":
            return cls()
        import re

        ids: set[int] = set()
        for part in body.split(","):
            m = re.match(_RANGE, part)
            if m is None:
                raise CPUSetError(f"invalid cpu list {text.strip()!r}: bad element {part!r}")
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) is not None else lo
            if hi < lo:
                raise CPUSetError(f"invalid cpu list {text.strip()!r}: range {part!r} is reversed")
            if hi > MAX_ID:
                raise CPUSetError(
                    f"invalid cpu list {text.strip()!r}: id {hi} exceeds the limit {MAX_ID}"
                )
            ids.update(range(lo, hi + 1))
        return cls(ids)

    @classmethod
    def from_mask(cls, text: str) -> CPUSet:
        """Parse the kernel's hex mask format: comma-separated 32-bit words, most
        significant first ("00000000,0000ff0f")."""
        body = text.strip()
        if body == "":
            return cls()
        words = body.split(",")
        if len(words) * 32 > MAX_ID + 1 + 32 * 64:
            raise CPUSetError(f"cpu mask too long ({len(words)} words)")
        import re

        value = 0
        for w in words:
            if not re.match(_HEXWORD, w):
                raise CPUSetError(f"invalid cpu mask {body!r}: bad word {w!r}")
            value = (value << 32) | int(w, 16)
        return cls.from_int(value)

    @classmethod
    def from_int(cls, value: int) -> CPUSet:
        """Bitmask (bit i = id i) to a set."""
        if value < 0:
            raise CPUSetError("cpu bitmask must be non-negative")
        if value.bit_length() > MAX_ID + 1:
            raise CPUSetError(f"cpu bitmask has bits above {MAX_ID}")
        # visit only the set bits: sysfs masks on big machines are mostly zeros
        ids = []
        while value:
            low = value & -value
            ids.append(low.bit_length() - 1)
            value ^= low
        return cls(ids)

    # -- formatting ---------------------------------------------------------
    def __str__(self) -> str:
        """Canonical list format: ascending, ranges of 2+ collapsed ("0-1" for two)."""
        out: list[str] = []
        ids = self._sorted
        i = 0
        while i < len(ids):
            j = i
            while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
                j += 1
            out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
            i = j + 1
        return ",".join(out)

    def __repr__(self) -> str:
        return f"CPUSet({str(self)!r})"

    def to_int(self) -> int:
        v = 0
        for i in self._ids:
            v |= 1 << i
        return v

    def to_mask(self) -> str:
        """Kernel hex mask format, 32-bit words, most significant first."""
        v = self.to_int()
        words = []
        while True:
            words.append(f"{v & 0xFFFFFFFF:08x}")
            v >>= 32
            if not v:
                break
        return ",".join(reversed(words))

    # -- set protocol -------------------------------------------------------
    def __iter__(self) -> Iterator[int]:
        return iter(self._sorted)

    def __len__(self) -> int:
        return len(self._sorted)

    def __contains__(self, item: object) -> bool:
        return item in self._ids

    def __bool__(self) -> bool:
        return bool(self._ids)

    def __hash__(self) -> int:
        return hash(self._ids)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CPUSet):
            return self._ids == other._ids
        return NotImplemented

    def __le__(self, other: CPUSet) -> bool:
        return self._ids <= other._ids

    def __lt__(self, other: CPUSet) -> bool:
        return self._ids < other._ids

    def __ge__(self, other: CPUSet) -> bool:
        return self._ids >= other._ids

    def __gt__(self, other: CPUSet) -> bool:
        return self._ids > other._ids

    def __or__(self, other: CPUSet) -> CPUSet:
        return CPUSet(self._ids | other._ids)

    def __and__(self, other: CPUSet) -> CPUSet:
        return CPUSet(self._ids & other._ids)

    def __sub__(self, other: CPUSet) -> CPUSet:
        return CPUSet(self._ids - other._ids)

    def __xor__(self, other: CPUSet) -> CPUSet:
        return CPUSet(self._ids ^ other._ids)

    union = __or__
    intersection = __and__
    difference = __sub__

    def isdisjoint(self, other: CPUSet) -> bool:
        return self._ids.isdisjoint(other._ids)

    # -- helpers ------------------------------------------------------------
    def sorted(self) -> tuple[int, ...]:
        return self._sorted

    def first(self) -> int:
        if not self._sorted:
            raise ValueError("empty CPUSet has no first element")
        return self._sorted[0]

    def take(self, n: int) -> CPUSet:
        """The n lowest ids."""
        if n < 0 or n > len(self._sorted):
            raise ValueError(f"cannot take {n} of {len(self._sorted)} ids")
        return CPUSet(self._sorted[:n])

    @classmethod
    def union_all(cls, sets: Iterable[CPUSet]) -> CPUSet:
        acc: set[int] = set()
        for s in sets:
            acc |= s._ids
        return cls(acc)
