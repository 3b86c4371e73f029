"""The runner's own decisions, with a stand-in for qemu (no VM, no root): exit status and
artifacts of a finished guest, one retry when qemu dies before the guest starts or the guest
stays silent past its measured boot budget, none after; a guest cut at its limit reported
with what passed, failed and was running; one guest's overrun held to the tier's budget."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.vm import runner
from tests.vm.topologies import TOPOLOGIES, GuestTopology, Node

# a qemu stand-in: finds its serial file and the out dir in its arguments, then acts per $FAKE_MODE
FAKE_QEMU = r"""#!/bin/bash
for a in "$@"; do case "$a" in file:*) serial="${a#file:}" ;; esac; done
out="$(dirname "$serial")"
n=$(( $(cat "$out/.calls" 2>/dev/null || echo 0) + 1 )); echo $n > "$out/.calls"
case "$FAKE_MODE:$n" in
    crash-once:1|crash-always:*) kill -SEGV $$ ;;
    crash-late:*) echo "VMTEST: initramfs up" > "$serial"; kill -SEGV $$ ;;
    silent-once:1|silent-always:*) exec sleep 1000 ;;
    crash-then-silent:1) kill -SEGV $$ ;;
    crash-then-silent:*) exec sleep 1000 ;;
    slow-boot-wedged:*) sleep 1; echo "VMTEST: initramfs up" > "$serial"; exec sleep 1000 ;;
    cut-mid-run:*) echo "VMTEST: initramfs up" > "$serial"; cat "$FAKE_PROGRESS" > "$out/progress.jsonl"
        exec sleep 1000 ;;
esac
echo "VMTEST: initramfs up" > "$serial"; echo "VMTEST-RC=4" >> "$serial"; echo 4 > "$out/rc"
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    exe = tmp_path / "qemu"
    exe.write_text(FAKE_QEMU)
    exe.chmod(0o755)
    monkeypatch.setenv("HWAGENT_VM_QEMU", str(exe))
    monkeypatch.setenv("HWAGENT_VM_ACCEL", "tcg")
    monkeypatch.setenv("HWAGENT_VM_BOOT_HISTORY", str(tmp_path / "boot-times"))
    monkeypatch.setenv("HWAGENT_VM_BOOT_BUDGET", "2")
    image = runner.Image(tmp_path / "image", "0.0-test")

    def boot(mode: str, timeout_s: float = 30, stretch: bool = False,
             not_after: float | None = None) -> runner.GuestRun:
        monkeypatch.setenv("FAKE_MODE", mode)
        return runner.boot(image, TOPOLOGIES["numa2"], "true", tmp_path / mode, timeout_s=timeout_s,
                           stretch=stretch, not_after=not_after)

    return boot


def calls(run: runner.GuestRun) -> int:
    return int((run.out_dir / ".calls").read_text())


def test_exit_status_comes_back(fake) -> None:
    run = fake("ok")
    assert (run.rc, run.qemu_rc, run.crashes, calls(run)) == (4, 0, (), 1)
    assert run.describe().startswith("rc=4")
    assert 'export HWAGENT_VM_TOPOLOGY=numa2' in (run.out_dir / "cmd.sh").read_text()


def test_qemu_crash_before_the_guest_starts_is_retried_once_and_reported(fake) -> None:
    run = fake("crash-once")
    assert (run.rc, run.crashes, calls(run)) == (4, (-11,), 2)
    assert "qemu died at start (signal 11)" in run.describe() and "retry" in run.describe()
    assert (run.out_dir / "qemu.log.crashed").exists()  # the crashed attempt's output is kept


def test_qemu_crashing_every_time_is_reported_not_looped(fake) -> None:
    run = fake("crash-always")
    assert run.rc is None and calls(run) == 2 and run.never_started
    assert run.describe().count("qemu died at start (signal 11)") == 2


def test_qemu_crash_after_the_guest_started_is_a_result(fake) -> None:
    run = fake("crash-late")
    assert run.rc is None and run.crashes == () and calls(run) == 1
    assert "signal 11" in run.describe()


def test_silent_guest_is_killed_at_its_boot_budget_and_retried_once(fake) -> None:
    run = fake("silent-once")
    assert (run.rc, calls(run)) == (4, 2)
    [failure] = run.start_failures
    assert failure.kind == "silent" and 2 <= failure.after_s < 2 + 5
    assert "guest silent for 2s" in run.describe() and "retry" in run.describe()
    assert (run.out_dir / "qemu.log.silent").exists()


def test_guest_silent_twice_is_reported_with_both_attempts_within_two_budgets(fake) -> None:
    run = fake("silent-always", timeout_s=600)
    assert run.rc is None and run.never_started and not run.timed_out and calls(run) == 2
    assert [f.kind for f in run.start_failures] == ["silent", "silent"]
    assert run.wall_s < 600 / 2  # nowhere near the command's timeout
    assert run.describe().count("guest silent") == 2


def test_crash_then_silent_is_one_retry_not_two(fake) -> None:
    """The failure seen in the tier: a crash at start, then a silent guest (was 600 s)."""
    run = fake("crash-then-silent", timeout_s=600)
    assert calls(run) == 2 and run.never_started
    assert [f.kind for f in run.start_failures] == ["crash", "silent"]
    assert "signal 11" in run.describe() and "guest silent" in run.describe()


def test_boot_budget_comes_from_measured_boots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HWAGENT_VM_BOOT_BUDGET", raising=False)
    monkeypatch.setenv("HWAGENT_VM_BOOT_HISTORY", str(tmp_path / "boot-times"))
    assert runner.boot_budget_s(tmp_path, 0.5) == runner.BOOT_BUDGET_UNMEASURED_S
    runner.record_boot(tmp_path, 12.0, 0.5)  # quiet machine: 12 s
    runner.record_boot(tmp_path, 30.0, 3.0)  # 3 runnable per CPU: 30 s, i.e. 10 s per unit of load
    assert runner.boot_budget_s(tmp_path, 0.5) == runner.BOOT_BUDGET_FACTOR * 12.0
    assert runner.boot_budget_s(tmp_path, 4.0) == runner.BOOT_BUDGET_FACTOR * 12.0 * 4.0  # scaled to the load now
    for _ in range(runner.BOOT_HISTORY + 5):
        runner.record_boot(tmp_path, 1.0, 0.1)
    assert len((tmp_path / "boot-times").read_text().splitlines()) == runner.BOOT_HISTORY
    assert runner.boot_budget_s(tmp_path, 0.1) == runner.BOOT_BUDGET_FLOOR_S  # fast boots: the floor


def test_timeout_stretch_follows_the_boot_against_the_quickest(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HWAGENT_VM_BOOT_HISTORY", str(tmp_path / "boot-times"))
    assert runner.timeout_stretch(tmp_path, 50.0) == 1.0  # nothing measured: no stretch
    runner.record_boot(tmp_path, 20.0, 1.0)
    runner.record_boot(tmp_path, 10.0, 0.2)
    assert runner.timeout_stretch(tmp_path, 8.0) == 1.0  # quicker than ever: never shrinks
    assert runner.timeout_stretch(tmp_path, 20.0) == 2.0
    assert runner.timeout_stretch(tmp_path, 500.0) == runner.MAX_TIMEOUT_STRETCH  # bounded


def test_a_slow_boot_stretches_the_timeout_only_when_asked(fake, tmp_path: Path) -> None:
    runner.record_boot(tmp_path / "image", 0.25, 0.0)  # the quickest boot seen: 4x quicker than this one
    plain = fake("slow-boot-wedged", timeout_s=2)
    assert plain.timed_out and plain.boot_s is not None
    stretched = fake("slow-boot-wedged", timeout_s=2, stretch=True)
    assert stretched.timed_out and stretched.rc is None
    # killed no earlier than the stretched deadline (a lower bound: load only makes it later)
    assert stretched.wall_s >= 2 * min(runner.MAX_TIMEOUT_STRETCH, stretched.boot_s / 0.25) - 0.5


def test_tcg_uses_a_named_cpu_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HWAGENT_VM_ACCEL", "tcg")
    args = runner.accel_args()
    assert args[:2] == ["-accel", "tcg"] and not args[3].startswith("max")


def test_paths_with_spaces_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="spaces"):
        runner.qemu_command(runner.Image(tmp_path / "a b", "x"), TOPOLOGIES["numa2"], "v2", tmp_path, tmp_path)


def test_every_topology_spec_is_consistent() -> None:
    for topo in TOPOLOGIES.values():
        args = topo.qemu_args()
        assert args[args.index("-smp") + 1].startswith(str(topo.ncpus))
        assert sum(1 for a in args if a.startswith("node,nodeid=")) == len(topo.nodes)
    with pytest.raises(ValueError, match="partition"):
        GuestTopology("bad", sockets=1, cores=1, threads=2, nodes=(Node((0,), 64),), distances=((10,),))
    with pytest.raises(ValueError, match="local distance"):
        GuestTopology("bad", sockets=1, cores=1, threads=1, nodes=(Node((0,), 64),), distances=((12,),))


# what the guest's pytest had written (tests/vm/progress.py) when qemu was killed
CUT_PROGRESS = [
    {"event": "session", "t": 1000.0, "collected": 5},
    {"event": "start", "t": 1001.0, "test": "tests/vm/guest/test_topology.py::test_nodes"},
    {"event": "end", "t": 1002.0, "test": "tests/vm/guest/test_topology.py::test_nodes", "outcome": "passed"},
    {"event": "start", "t": 1003.0, "test": "tests/vm/guest/test_hwagent_run.py::test_start_serve_restart_stop"},
    {"event": "end", "t": 1090.0, "test": "tests/vm/guest/test_hwagent_run.py::test_start_serve_restart_stop",
     "outcome": "failed", "reason": "AssertionError: component devicemanager failed to start"},
    {"event": "start", "t": 1091.0, "test": "tests/vm/guest/test_workloads.py::test_admit_and_run"},
]


def test_a_guest_cut_at_its_limit_reports_what_passed_failed_and_was_running(fake, tmp_path, monkeypatch) -> None:
    source = tmp_path / "cut-progress.jsonl"
    source.write_text("".join(json.dumps(x) + "\n" for x in CUT_PROGRESS))
    monkeypatch.setenv("FAKE_PROGRESS", str(source))
    stale = tmp_path / "cut-mid-run" / "progress.jsonl"
    stale.parent.mkdir()
    stale.write_text(json.dumps({"event": "end", "t": 1, "test": "old::run", "outcome": "passed"}) + "\n")
    run = fake("cut-mid-run", timeout_s=2)
    assert run.timed_out and run.rc is None
    assert runner.result_counts(run, None) == \
        "partial: 1 passed, 1 failed, 0 skipped, cut in tests/vm/guest/test_workloads.py::test_admit_and_run"
    verdict = runner.guest_verdict(run, None, "numa2 (two nodes)")
    assert verdict is not None
    assert verdict.startswith("numa2 (two nodes), cgroup v2: TIMED OUT after 2s, limit 2s (guest killed)")
    assert "2 of 5 guest tests finished: 1 passed, 1 failed, 0 skipped" in verdict
    assert ("FAILED tests/vm/guest/test_hwagent_run.py::test_start_serve_restart_stop: "
            "failed: AssertionError: component devicemanager failed to start") in verdict
    assert ("running when cut: tests/vm/guest/test_workloads.py::test_admit_and_run "
            "(started 91s into the guest's session)") in verdict
    assert "old::run" not in verdict  # an earlier run's file is not taken for this one's
    assert "--- serial log tail ---" in verdict


def test_a_guest_that_never_reached_pytest_says_so(fake) -> None:
    run = fake("slow-boot-wedged", timeout_s=2)
    verdict = runner.guest_verdict(run, None, "numa2")
    assert verdict is not None and "reported no test (no progress.jsonl: it had not finished collecting" in verdict


def test_the_guest_command_reports_each_test_to_out() -> None:
    cmd = runner.guest_pytest_command()
    assert "-p tests.vm.progress --vm-progress=/out/progress.jsonl" in cmd
    assert "--junitxml=/out/junit.xml" in cmd


def test_the_tier_budget_caps_a_guest_and_keeps_time_for_the_ones_after_it(fake) -> None:
    tier = runner.TierBudget(total_s=2 + 2 * runner.GUEST_RESERVE_S)
    # two guests still to run after this one: it gets what is left less their reserve
    assert tier.not_after(2) == pytest.approx(tier.started + 2)
    run = fake("slow-boot-wedged", timeout_s=30, stretch=True, not_after=tier.not_after(2))
    assert run.timed_out and run.cut_by_tier and run.limit_s is not None and run.limit_s < 3
    assert run.wall_s < 10  # nowhere near its own 30 s
    assert "cut to what was left of the VM tier's budget" in run.describe()
    assert tier.refusal(2) is not None and "still to run after it" in str(tier.refusal(2))
    assert tier.refusal(1) is None  # the next guest has its reserve whole
    assert tier.refusal(0, now=tier.started + tier.total_s - 5) is not None


def test_a_guest_within_the_tier_budget_keeps_its_own_limit(fake) -> None:
    tier = runner.TierBudget(total_s=3600)
    run = fake("slow-boot-wedged", timeout_s=2, not_after=tier.not_after(1))
    assert run.timed_out and not run.cut_by_tier and "budget" not in run.describe()
    assert time.monotonic() < tier.not_after(1)


def test_a_first_boot_on_a_loaded_machine_is_stretched_by_the_load_it_ran_under(tmp_path, monkeypatch) -> None:
    """A fresh CI machine has no quiet boot remembered: the boot's own load is the reference
    (boots are remembered per unit of load, as for the boot budget)."""
    monkeypatch.setenv("HWAGENT_VM_BOOT_HISTORY", str(tmp_path / "boot-times"))
    assert runner.timeout_stretch(tmp_path, 20.0, load_per_cpu=0.5) == 1.0  # quiet: no stretch
    assert runner.timeout_stretch(tmp_path, 20.0, load_per_cpu=2.0) == 2.0  # 2 runnable per CPU
    assert runner.timeout_stretch(tmp_path, 20.0, load_per_cpu=9.0) == runner.MAX_TIMEOUT_STRETCH
    runner.record_boot(tmp_path, 30.0, 3.0)  # a loaded boot remembered: 10 s per unit of load
    assert runner.timeout_stretch(tmp_path, 20.0, load_per_cpu=1.0) == 2.0
