"""A deliberately literal model of the kubelet's merge, used as the tests' oracle.

It walks the whole cross product in order and keeps a running best with the
kubelet's pairwise rule (HintMerger.compare), exactly as the kubelet does, on
plain ints for masks. agent.topologymanager computes the same result differently
(distinct merged hints, then an order-independent selection); the property tests
check the two agree, and the kubelet's own compare table checks this model.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

Hint = tuple[int | None, bool]  # (mask or None = any, preferred)


def popcount(m: int) -> int:
    return bin(m).count("1")


def bits(m: int) -> list[int]:
    return [i for i in range(m.bit_length()) if m >> i & 1]


class Reference:
    def __init__(self, nodes: Sequence[int], distances: Mapping[int, Mapping[int, int]] | None = None,
                 prefer_closest: bool = False) -> None:
        self.default = sum(1 << n for n in nodes)
        self.distances = distances or {}
        self.prefer_closest = prefer_closest

    # -- the kubelet's NUMAInfo.Narrowest / Closest and bitmask.IsNarrowerThan
    @staticmethod
    def narrower(a: int, b: int) -> bool:
        if popcount(a) == popcount(b):
            return a < b
        return popcount(a) < popcount(b)

    def average(self, m: int) -> float:
        bs = bits(m)
        if not bs:
            return 0.0
        total = sum(self.distances[a][b] for a in bs for b in bs)
        return total / (len(bs) * len(bs))

    def fitter(self, current: int, candidate: int, closest: bool) -> int:
        """The mask CompareNUMAAffinityMasks keeps: current on a tie."""
        if candidate == current:
            return current
        if closest:
            if popcount(current) != popcount(candidate):
                best = current if self.narrower(current, candidate) else candidate
            else:
                da, db = self.average(current), self.average(candidate)
                if da == db:
                    best = current if current < candidate else candidate
                else:
                    best = current if da < db else candidate
        else:
            best = current if self.narrower(current, candidate) else candidate
        return current if best == current else candidate

    def compare(self, current: Hint | None, candidate: Hint, target: int, closest: bool) -> Hint | None:
        """HintMerger.compare: which of current/candidate the running best becomes."""
        cmask, cpref = candidate
        if popcount(cmask) == 0:
            return current
        if current is None:
            return candidate
        mask, pref = current
        if not pref and cpref:
            return candidate
        if pref and not cpref:
            return current
        if pref and cpref:
            return current if self.fitter(mask, cmask, closest) == mask else candidate
        n, cn = popcount(mask), popcount(cmask)
        pick = lambda: current if self.fitter(mask, cmask, closest) == mask else candidate  # noqa: E731
        if n > target:
            return pick()
        if n == target:
            return current if cn != target else pick()
        if cn > target:
            return current
        if cn == target:
            return candidate
        if cn > n:
            return candidate
        if cn < n:
            return current
        return pick()

    # -- filterProvidersHints / mergePermutation / maxOfMinAffinityCounts
    @staticmethod
    def flatten(providers: Sequence[Mapping[str, Sequence[Hint] | None]]) -> list[list[Hint]]:
        out: list[list[Hint]] = []
        for p in providers:
            if not p:
                out.append([(None, True)])
                continue
            for hints in p.values():
                if hints is None:
                    out.append([(None, True)])
                elif len(hints) == 0:
                    out.append([(None, False)])
                else:
                    out.append(list(hints))
        return out

    def merge_permutation(self, perm: Sequence[Hint]) -> Hint:
        preferred = True
        masks: list[int] = []
        for mask, pref in perm:
            if mask is not None:
                masks.append(mask)
                if mask != masks[0]:
                    preferred = False
            if not pref:
                preferred = False
        merged = self.default
        for m in masks:
            merged &= m
        return merged, preferred

    @staticmethod
    def max_of_min_counts(lists: Sequence[Sequence[Hint]]) -> int:
        best = 0
        for hints in lists:
            narrowest = None
            for mask, _ in hints:
                if mask is None:
                    continue
                if narrowest is None or Reference.narrower(mask, narrowest):
                    narrowest = mask
            if narrowest is not None:
                best = max(best, popcount(narrowest))
        return best

    def merge_lists(self, lists: Sequence[Sequence[Hint]], closest: bool) -> Hint:
        target = self.max_of_min_counts(lists)
        best: Hint | None = None
        for perm in itertools.product(*lists):
            best = self.compare(best, self.merge_permutation(perm), target, closest)
        return best if best is not None else (self.default, False)

    # -- the policies' Merge: (mask or None, preferred), admit
    def merge(self, policy: str, providers: Sequence[Mapping[str, Sequence[Hint] | None]]) -> tuple[Hint, bool]:
        lists = self.flatten(providers)
        if policy == "single-numa-node":
            lists = [[h for h in hs if h[1] and (h[0] is None or popcount(h[0]) == 1)] for hs in lists]
            mask, pref = self.merge_lists(lists, closest=False)
            return ((None if mask == self.default else mask), pref), pref
        mask, pref = self.merge_lists(lists, closest=self.prefer_closest)
        return (mask, pref), (policy == "best-effort" or pref)
