"""VM tier test plumbing.

tests/vm/guest only makes sense inside the qemu guest (runner.py sets HWAGENT_VM_GUEST=1
there). On the host it is not collected; tests/vm/test_vm_tier.py boots the guests, runs
it there and reports every guest failure and skip. The per-topology timings of the run
are printed in pytest's terminal summary.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

collect_ignore = [] if os.environ.get("HWAGENT_VM_GUEST") == "1" else ["guest"]

_TIMINGS: list[tuple[str, Any, Any]] = []


@pytest.fixture(scope="session")
def tier_budget() -> Any:
    """One budget for all the guests of this session, the qemu tier's and the Vagrant
    machine's alike (runner.TierBudget), so that both together keep the CI run's 90 minutes."""
    from tests.vm.runner import TierBudget

    return TierBudget()


def record_vm_timing(name: str, run: Any, summary: Any) -> None:
    _TIMINGS.append((name, run, summary))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    if not _TIMINGS:
        return
    from tests.vm.runner import result_counts  # the host's side only: the guest never gets here

    tr = terminalreporter
    tr.section("VM tier (qemu guests)")
    total = 0.0
    for name, run, summary in _TIMINGS:
        total += run.wall_s
        counts = result_counts(run, summary)
        tr.write_line(f"{name:8s} cgroup={run.cgroup:6s} {run.describe():32s} {counts}  [{run.out_dir}]")
    tr.write_line(f"guest boots total {total:.0f}s")
