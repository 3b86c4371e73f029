"""The shipped unit under a real systemd as PID 1 (the VM tier's "systemd" guest).

Runs only where systemd is PID 1; every other guest skips it. The unit is the
one `hwagent install-unit` writes for this checkout's venv, so what is tested
is what an operator installs: Type=notify start, the watchdog, reload, a config
error that must not loop, stop, the delegated cgroup, and journald's fields.

What the emulator needs is added beside it, not into it: a drop-in scales the unit's
time budgets by this guest's measured slowdown (tests/vm/unit_dropin.py), and the first
test is the gate of the rest (tests/vm/gate.py): if the start runs out of time, the
guest stops there with that reason instead of timing out every test after it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.vm import calibrate, unit_dropin
from tests.vm.gate import SYSTEMD_TIMEOUT, GuestTimeout

REPO = Path(__file__).resolve().parents[3]
HWAGENT = Path(sys.executable).parent / "hwagent"
CONFIG = Path("/etc/hwagent/config.toml")
#: how much slower this guest is than its host (tests/vm/calibrate.py); waits scale by it
SLOW = max(1.0, calibrate.slowdown())

def _pid1() -> str:
    try:
        return Path("/proc/1/comm").read_text().strip()
    except OSError:
        return ""


pytestmark = pytest.mark.skipif(_pid1() != "systemd", reason="needs systemd as PID 1 (the systemd guest)")


def sh(*argv: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout * SLOW)
    if check and r.returncode != 0:
        # systemd gave up on a job for its unit's timeout: a timeout, for the gate (tests/vm/gate.py)
        error = GuestTimeout if SYSTEMD_TIMEOUT in r.stderr else AssertionError
        raise error(f"{' '.join(argv)}: rc {r.returncode}\n{r.stdout}\n{r.stderr}\n{journal_tail()}")
    return r


def journal_tail(n: int = 40) -> str:
    return subprocess.run(["journalctl", "-u", "hwagent", "-n", str(n), "--no-pager"], capture_output=True,
                          text=True, timeout=60).stdout


def prop(name: str) -> str:
    return sh("systemctl", "show", "-p", name, "--value", "hwagent").stdout.strip()


def wait_for(pred, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout * SLOW
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.5)
    raise GuestTimeout(f"timed out waiting for {what}\n{journal_tail()}")


def write_config(extra: str = "") -> None:
    CONFIG.parent.mkdir(parents=True, exist_ok=True)
    CONFIG.write_text('[daemon]\nmode = "standalone"\nlog_level = "info"\n' + extra)


#: the unit's time budgets on a real machine, from the shipped template (the installed unit is the same)
REAL_TIMINGS = unit_dropin.unit_timings((REPO / "systemd" / "hwagent.service").read_text())
#: the drop-in's budgets for this guest
GUEST_TIMINGS = unit_dropin.scaled_timings(REAL_TIMINGS, SLOW)


@pytest.fixture(scope="module")
def unit():
    sh(str(HWAGENT), "install-unit", "--force")
    write_config()
    # the shipped unit as it is, and beside it the emulator's drop-in: its time budgets
    # scaled by this guest's slowdown (the daemon pings the watchdog from its start, and
    # imports its modules over 9p on this slow emulated CPU)
    dropin = Path(unit_dropin.DROPIN)
    dropin.parent.mkdir(parents=True, exist_ok=True)
    dropin.write_text(unit_dropin.render_dropin(REAL_TIMINGS, SLOW))
    # on the console (pytest captures stdout) and beside the guest's artifacts
    say = f"guest slowdown {SLOW:.2f}x (tests/vm/calibrate.py); {dropin}:\n{dropin.read_text()}"
    for out in (Path("/dev/console"), Path(os.environ.get("HWAGENT_VM_OUT", "/out")) / "hwagent-dropin.txt"):
        try:
            out.write_text(say)
        except OSError:
            pass
    sh("systemctl", "daemon-reload")
    yield
    sh("systemctl", "stop", "hwagent", check=False)


def healthz() -> bool:
    try:
        return urllib.request.urlopen("http://127.0.0.1:9464/healthz", timeout=5).status == 200
    except OSError:
        return False


@pytest.mark.vm_gate
def test_start_reaches_active_through_notify(unit):
    # the emulator's budgets are the ones in force (systemd shows WatchdogUSec once the unit runs)
    assert unit_dropin.DROPIN in prop("DropInPaths")
    assert unit_dropin.parse_timespan(prop("TimeoutStartUSec")) == GUEST_TIMINGS["TimeoutStartSec"], GUEST_TIMINGS
    sh("systemctl", "start", "hwagent")  # returns only after READY=1 (Type=notify)
    assert unit_dropin.parse_timespan(prop("WatchdogUSec")) == GUEST_TIMINGS["WatchdogSec"], GUEST_TIMINGS
    assert prop("ActiveState") == "active" and prop("SubState") == "running"
    assert prop("Type") == "notify"
    assert int(prop("MainPID")) > 0
    assert healthz()


def test_journal_has_the_structured_lines(unit):
    out = sh("journalctl", "-u", "hwagent", "-o", "json", "--no-pager").stdout
    entries = [json.loads(line) for line in out.splitlines() if line.strip()]
    ready = [e for e in entries if "hwagent ready" in str(e.get("MESSAGE", ""))]
    assert ready, journal_tail()
    msg = ready[-1]["MESSAGE"]
    assert "mode=standalone" in msg and "startup_seconds=" in msg
    assert ready[-1]["PRIORITY"] == "6"  # info, from the <6> prefix the daemon writes under journald
    starting = [e for e in entries if "hwagent starting" in str(e.get("MESSAGE", ""))]
    assert starting and f"config={CONFIG}" in starting[-1]["MESSAGE"]


def test_reload_rereads_the_config_in_the_same_process(unit):
    pid = prop("MainPID")
    write_config('\n[pressure]\nsoft_threshold = 0.4\n')
    sh("systemctl", "reload", "hwagent")
    wait_for(lambda: "reload" in journal_tail(20).lower(), "a reload line in the journal")
    assert prop("MainPID") == pid and prop("ActiveState") == "active"
    write_config()
    sh("systemctl", "reload", "hwagent")


# systemd acts after the guest's WatchdogSec, then starts the daemon again: more than the
# tier's 300 s per test where the guest is slow
@pytest.mark.timeout(int(GUEST_TIMINGS["WatchdogSec"] + 300 * SLOW))
def test_a_wedged_daemon_is_restarted_by_the_watchdog(unit):
    pid = int(prop("MainPID"))
    restarts = int(prop("NRestarts"))
    os.kill(pid, signal.SIGSTOP)  # alive but silent: only the watchdog can tell
    wait_for(lambda: int(prop("NRestarts")) > restarts, "a watchdog restart",
             timeout=GUEST_TIMINGS["WatchdogSec"] / SLOW + 150)
    wait_for(lambda: prop("ActiveState") == "active" and int(prop("MainPID")) not in (0, pid), "the new daemon")
    # systemd's own line about the unit ("Watchdog timeout (limit 5min)!") says why it restarted
    assert "watchdog timeout" in journal_tail(100000).lower()


def test_a_config_error_stops_without_a_restart_loop(unit):
    write_config("no_such_key = 1\n")
    sh("systemctl", "restart", "hwagent", check=False)
    wait_for(lambda: prop("ActiveState") in ("failed", "inactive"), "the failed start")
    restarts = int(prop("NRestarts"))
    time.sleep(8)  # RestartSec=2s: a loop would have restarted it by now
    assert int(prop("NRestarts")) == restarts
    assert prop("ExecMainStatus") == "2"
    assert "no_such_key" in journal_tail(40)
    write_config()
    sh("systemctl", "reset-failed", "hwagent", check=False)


def test_stop_is_clean_and_leaves_no_socket(unit):
    sh("systemctl", "start", "hwagent")
    root = Path("/var/lib/hwagent")
    assert (root / "device-plugins" / "registration.sock").exists()
    sh("systemctl", "stop", "hwagent")
    assert prop("ActiveState") == "inactive"
    assert prop("Result") == "success"
    assert not (root / "device-plugins" / "registration.sock").exists()
    assert not (root / "hwagent.pid").exists()


def test_the_service_cgroup_is_delegated(unit):
    if prop("Delegate") != "yes":
        pytest.skip("the unit does not delegate its cgroup (the workload runtime is not in this build)")
    sh("systemctl", "start", "hwagent")
    cg = Path("/sys/fs/cgroup") / prop("ControlGroup").lstrip("/")
    # delegated: hwagent (root) may create and manage children below its own cgroup
    assert (cg / "cgroup.subtree_control").exists()
    sh("systemctl", "stop", "hwagent")
