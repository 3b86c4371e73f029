"""Host side of the VM tier: boot each guest topology, run tests/vm/guest inside it, and
fail here with the guest's own failures (and serial log tail) when anything fails there.

Runs as part of `scripts/dev test` when the machine can (root; qemu installable from apt).
Skips are explicit and listed in pytest's summary: HWAGENT_SKIP_VM=1 (on request), not
root, or prerequisites unavailable (build-image.sh says which). Every guest test that
skipped inside a guest is reported back as a warning, so nothing is skipped silently.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from tests.vm import runner
from tests.vm.conftest import record_vm_timing
from tests.vm.topologies import TOPOLOGIES

pytestmark = [pytest.mark.vm, pytest.mark.slow, pytest.mark.root]

GUEST_TIMEOUT_S = runner.DEFAULT_TIMEOUT_S


@pytest.fixture(scope="session")
def vm_image() -> runner.Image:
    if os.environ.get("HWAGENT_SKIP_VM") == "1":
        pytest.skip("VM tier skipped on request (HWAGENT_SKIP_VM=1)")
    if os.geteuid() != 0:
        pytest.skip("VM tier needs root (apt packages, 9p export of /)")
    try:
        return runner.build_image()
    except runner.Unavailable as e:
        pytest.skip(f"VM tier unavailable on this machine: {e}")


@pytest.fixture(scope="session")
def out_root() -> Path:
    return runner.default_out_root()


def guests_after(request: pytest.FixtureRequest) -> int:
    """How many guest suites this session still runs after the current one."""
    items = request.session.items
    name = getattr(request.node, "originalname", None)
    return len([item for item in items[items.index(request.node) + 1:] if getattr(item, "originalname", None) == name])


@pytest.mark.timeout(int(GUEST_TIMEOUT_S * runner.MAX_TIMEOUT_STRETCH) + 120)
@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_guest_suite(name: str, vm_image: runner.Image, out_root: Path, tier_budget: runner.TierBudget,
                     request: pytest.FixtureRequest) -> None:
    topo = TOPOLOGIES[name]
    after = guests_after(request)
    refused = tier_budget.refusal(after)
    if refused:
        pytest.fail(f"{name}: {refused}")
    run = runner.boot(vm_image, topo, runner.guest_pytest_command(tests=topo.guest_tests), out_root / name,
                      timeout_s=GUEST_TIMEOUT_S, stretch=True, not_after=tier_budget.not_after(after))
    summary = runner.read_junit(run.junit) if run.junit.exists() else None
    record_vm_timing(name, run, summary)
    for test, reason in summary.skips if summary else ():
        warnings.warn(f"VM guest {name}: skipped {test}: {reason}", stacklevel=1)
    verdict = runner.guest_verdict(run, summary, f"{name} ({topo.description})")
    assert verdict is None, verdict


@pytest.mark.timeout(300)
def test_guest_exit_status_and_artifacts_come_back(vm_image: runner.Image, out_root: Path) -> None:
    """A failing guest command is seen as failing, and files written to /out arrive."""
    run = runner.boot(vm_image, TOPOLOGIES["numa2"], 'echo "$HWAGENT_VM_TOPOLOGY" > /out/marker; exit 3',
                      out_root / "exit-status", cgroup="none", timeout_s=240)
    assert run.rc == 3, run.describe() + "\n" + run.serial_tail()
    assert (run.out_dir / "marker").read_text().strip() == "numa2"
    assert "VMTEST-RC=3" in run.serial_log.read_text(errors="replace")


@pytest.mark.timeout(180)
def test_wedged_guest_is_killed_and_reported(vm_image: runner.Image, out_root: Path) -> None:
    run = runner.boot(vm_image, TOPOLOGIES["numa2"], "sleep 100000", out_root / "wedged",
                      cgroup="none", timeout_s=45)
    assert run.timed_out and run.rc is None
    assert run.wall_s < 45 + 15, run.wall_s
    assert "TIMED OUT" in run.describe()
