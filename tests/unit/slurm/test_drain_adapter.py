"""The scontrol adapter's failures are clear errors (no scontrol, one that hangs, one that refuses),
the status socket's ``health`` view says what the drain counts, and the drain component retries
a failing scontrol with a growing pause, never draining on its own."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent.contracts.plugins import PluginDeviceState, PluginState
from agent.slurm.drainer import DrainSettings, SlurmDrain
from agent.slurm.scontrol import Scontrol, ScontrolError
from agent.status.views import Handles, health_view


def fake_scontrol(tmp_path: Path, body: str) -> str:
    """A directory holding an ``scontrol`` that runs ``body`` (a peer that misbehaves)."""
    d = tmp_path / "bin"
    d.mkdir()
    p = d / "scontrol"
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)
    return str(d)


def test_no_scontrol_is_a_clear_error(tmp_path):
    with pytest.raises(ScontrolError, match=r"no scontrol at .*/nowhere/scontrol \(set \[slurm\] bin_dir\)"):
        Scontrol(str(tmp_path / "nowhere")).show_node("n1")


def test_a_hanging_scontrol_times_out(tmp_path):
    s = Scontrol(fake_scontrol(tmp_path, "exec /bin/sleep 30"), timeout_s=0.3)
    with pytest.raises(ScontrolError, match=r"scontrol update NodeName=n1 State=DRAIN Reason=hwagent: x: no answer "
                                            r"within 0.3s"):
        s.drain("n1", "hwagent: x")


def test_a_refusal_names_the_command_and_what_scontrol_said(tmp_path):
    s = Scontrol(fake_scontrol(tmp_path, 'echo "slurm_update error: Invalid node name specified" >&2; exit 1'))
    with pytest.raises(ScontrolError, match=r"scontrol update NodeName=n9 State=RESUME: exit 1: slurm_update error: "
                                            r"Invalid node name specified"):
        s.resume("n9")


def test_scontrol_gets_a_clean_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("LD_PRELOAD", "/evil.so")
    s = Scontrol(fake_scontrol(tmp_path, '/usr/bin/env; echo "NodeName=n1 State=IDLE"'), slurm_conf="/etc/x/slurm.conf")
    env = dict(line.split("=", 1) for line in s._run("x").splitlines() if "=" in line and not line.startswith("Node"))
    assert env.get("SLURM_CONF") == "/etc/x/slurm.conf" and "LD_PRELOAD" not in env
    assert env["PATH"] == s.bin_dir


class Plugins:
    def __init__(self, states):
        self.states = states

    def plugin_states(self):
        return self.states

    def dra_states(self):
        return []

    def device_nodes(self):
        return ()


SICK = [PluginState("example.com/scratch", Path("/s"), (PluginDeviceState("loop7", False, "3 errors"),))]


def test_the_health_view_lists_what_the_drain_counts():
    view = health_view(Handles(plugins=Plugins(SICK)), [("pressure", True), ("deviceplugins", False)])
    assert view == {"problems": [{"subject": "component deviceplugins", "why": "unhealthy"},
                                 {"subject": "example.com/scratch loop7", "why": "3 errors"}],
                    "devices_watched": True}
    assert health_view(Handles(), []) == {"problems": [], "devices_watched": False}


def test_a_failing_scontrol_is_retried_with_a_growing_pause_and_drains_nothing(tmp_path):
    calls = tmp_path / "calls"
    bin_dir = fake_scontrol(tmp_path, f'echo "$@" >> {calls}; echo "Unable to contact slurm controller" >&2; exit 1')
    drain = SlurmDrain(DrainSettings("n1", bin_dir, interval_s=0.05, recheck_s=0.4))
    drain._plugins = Plugins(SICK)

    async def run() -> None:
        for _ in range(20):
            assert await drain.tick() is None
            await asyncio.sleep(0.05)

    asyncio.run(run())
    made = calls.read_text().splitlines()
    assert made and all(c == "show node -o n1" for c in made), made  # never an update without the node's state
    assert 3 <= len(made) <= 8, made  # 1 s of ticks: 0.05, 0.1, 0.2, 0.4, 0.4 ... apart, not every tick
    assert "Unable to contact slurm controller" in drain.last_error and drain.applied is None
    assert drain.healthy()


def test_health_check_without_a_daemon_says_so_and_exits_5(tmp_path):
    """As a HealthCheckProgram: no daemon is one clear line and exit 5 (not 0: it cannot vouch for
    the devices; not 1: that is the node's problems), and nothing on stdout."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "agent", "slurm", "health", "--root-dir", str(tmp_path / "none")],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (5, "")
    assert r.stderr.strip().splitlines() == [
        f"hwagent slurm: error: hwagent is not running with root dir {tmp_path / 'none'}: no status socket at "
        f"{tmp_path / 'none'}/status.sock; no device health to report"]
