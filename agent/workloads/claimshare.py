"""Who may share a ResourceClaim that pods already hold (standalone mode; pure).

In standalone mode every user's pods live in the same namespaces and any pod may
name any ResourceClaim root wrote under ``<root>/dra``. A claim that a running pod
holds is that pod's device: a second pod naming it shares the device (DRA's
shared claims). Across users that gave a member another user's device (issue 32
item 8, found in review: naming the claim root's pod held opened root's loop
device). The rule: a claim held by pods is shared only among pods of the same
user; root may share any (root decides what runs where); a claim nobody holds is
anyone's to take, as a device plugin's free device is.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["foreign_holder", "claim_share_refusal"]


def foreign_holder(wanted: Iterable[str], owner: int,
                   holders: Iterable[tuple[int, str, Iterable[str]]]) -> tuple[str, str] | None:
    """The first (claim, pod key) of ``wanted`` claim names that a pod of another user holds, or None.
    ``holders``: (owner uid, pod key, names of the claims it holds) per pod of the namespace."""
    want = set(wanted)
    for uid, key, held in holders:
        if uid == owner:
            continue
        for claim in sorted(want.intersection(held)):
            return claim, key
    return None


def claim_share_refusal(namespace: str, claim: str) -> str:
    """The refusal's message: what was refused and what to do. It does not name the holder's pod
    or user (the member may not see them)."""
    return (f"permission denied: ResourceClaim {namespace}/{claim} is held by a pod of another user; "
            "a claim is shared only among one user's pods; wait until it is released, "
            "or ask an admin for a claim of your own")
