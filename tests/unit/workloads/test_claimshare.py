"""agent.workloads.claimshare: a held claim is shared among one user's pods only."""

from __future__ import annotations

from agent.workloads.claimshare import claim_share_refusal, foreign_holder


def test_a_claim_another_user_holds_is_named_with_its_pod() -> None:
    holders = [(1000, "default/mine", ["a"]), (0, "default/roots", ["disk", "b"])]
    assert foreign_holder(["disk"], 1000, holders) == ("disk", "default/roots")


def test_the_same_users_pods_and_unheld_claims_share_freely() -> None:
    holders = [(1000, "default/mine", ["disk"]), (1001, "default/bobs", ["other"])]
    assert foreign_holder(["disk", "free"], 1000, holders) is None
    assert foreign_holder([], 1000, [(1001, "default/bobs", ["disk"])]) is None


def test_the_refusal_names_the_claim_but_not_the_holder() -> None:
    msg = claim_share_refusal("default", "disk")
    assert msg.startswith("permission denied") and "default/disk" in msg and "ask an admin" in msg
