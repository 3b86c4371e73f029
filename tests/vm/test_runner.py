"""The runner's own decisions, with a stand-in for qemu (no VM, no root): exit status and
artifacts of a finished guest, one retry when qemu dies before the guest starts, none after."""

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
    image = runner.Image(tmp_path / "image", "0.0-test")

    def boot(mode: str) -> runner.GuestRun:
        monkeypatch.setenv("FAKE_MODE", mode)
        return runner.boot(image, TOPOLOGIES["numa2"], "true", tmp_path / mode, timeout_s=30)

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
    assert "retried" in run.describe()
    assert (run.out_dir / "qemu.log.crashed").exists()  # the crashed attempt's output is kept


def test_qemu_crashing_every_time_is_reported_not_looped(fake) -> None:
    run = fake("crash-always")
    assert run.rc is None and calls(run) == 2
    assert "qemu killed by signal 11" in run.describe() and "retried" in run.describe()


def test_qemu_crash_after_the_guest_started_is_a_result(fake) -> None:
    run = fake("crash-late")
    assert run.rc is None and run.crashes == () and calls(run) == 1
    assert "signal 11" in run.describe()


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
