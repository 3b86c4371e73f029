"""The runner's own decisions, with a stand-in for qemu (no VM, no root): exit status and
artifacts of a finished guest, one retry when qemu dies before the guest starts or the guest
stays silent past its measured boot budget, none after."""

from __future__ import annotations

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

    def boot(mode: str, timeout_s: float = 30) -> runner.GuestRun:
        monkeypatch.setenv("FAKE_MODE", mode)
        return runner.boot(image, TOPOLOGIES["numa2"], "true", tmp_path / mode, timeout_s=timeout_s)

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
