"""The machine's NUMA nodes as masks, and the order in which masks are "better".

Masks are Python ints with bit n for node n, like the kubelet's ``bitmask``.
The kubelet's pairwise choices (``Narrowest``, ``Closest``, ``IsNarrowerThan``)
are each a comparison of a sort key, so they are expressed here as keys: a
smaller key is the better mask. That makes the choice independent of the order
in which candidates are met, which lets the merge deduplicate candidates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["NUMAInfo", "mask_of", "nodes_of", "popcount"]


def mask_of(nodes: Iterable[int]) -> int:
    mask = 0
    for n in nodes:
        mask |= 1 << n
    return mask


def nodes_of(mask: int) -> frozenset[int]:
    out = []
    n = 0
    while mask:
        if mask & 1:
            out.append(n)
        mask >>= 1
        n += 1
    return frozenset(out)


def popcount(mask: int) -> int:
    return mask.bit_count()


@dataclass(frozen=True)
class NUMAInfo:
    nodes: tuple[int, ...]
    #: distances[a][b]; only consulted with prefer-closest-numa-nodes
    distances: Mapping[int, Mapping[int, int]] = field(default_factory=dict)
    prefer_closest: bool = False

    @classmethod
    def build(
        cls,
        nodes: Sequence[int],
        distances: Mapping[int, Mapping[int, int]] | None,
        prefer_closest: bool,
    ) -> NUMAInfo:
        ids = tuple(sorted(set(nodes)))
        if len(ids) != len(nodes):
            raise ValueError(f"NUMA node ids must be unique, got {list(nodes)}")
        for n in ids:
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ValueError(f"NUMA node ids are integers >= 0, got {n!r}")
        if not ids:
            raise ValueError("the topology manager needs at least one NUMA node")
        table: dict[int, dict[int, int]] = {}
        if prefer_closest:
            # the kubelet fails to start when it cannot read the distances it was asked to use
            if distances is None:
                raise ValueError("prefer_closest_numa_nodes needs the NUMA distance matrix, and none was given")
            for a in ids:
                row = distances.get(a)
                missing = [b for b in ids if row is None or b not in row]
                if missing:
                    raise ValueError(
                        f"prefer_closest_numa_nodes: no distance from NUMA node {a} to {', '.join(map(str, missing))}"
                    )
                table[a] = {b: int(row[b]) for b in ids}  # type: ignore[index]
        return cls(ids, table, prefer_closest)

    @property
    def default_mask(self) -> int:
        """All nodes: what "no preference" means when masks are ANDed."""
        return mask_of(self.nodes)

    def distance_sum(self, mask: int) -> int:
        """Sum of distances over ordered pairs of the mask's nodes.

        The kubelet compares the average (sum / count²); it only compares masks
        of equal count, so comparing the integer sums is the same order without
        the floating point.
        """
        bits = sorted(nodes_of(mask))
        return sum(self.distances[a][b] for a in bits for b in bits)

    def fitness_key(self, mask: int, closest: bool) -> tuple[int, ...]:
        """Smaller is better: fewer nodes, then (closest) smaller average distance,
        then more lower-numbered nodes (the numerically smaller mask)."""
        if closest:
            return (popcount(mask), self.distance_sum(mask), mask)
        return (popcount(mask), mask)
