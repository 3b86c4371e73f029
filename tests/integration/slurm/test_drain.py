"""Unhealthy devices drain the node through the real Slurm, and only hwagent's drain is resumed
(issue 35 part 3).

Three slurmd nodes, each in its own network and UTS namespace, each with its own hwagent
(tests/integration/slurm/agents.py: its own root dir, its own loop device offered, the
node's host name as its NodeName). Real block errors on node 2's disk make that disk
unhealthy in node 2's hwagent (the block probe, as tests/integration/pressure does), and
node 2 alone is drained with hwagent's reason (``sinfo -R``); once the disk has been
quiet for the recovery time hwagent resumes it. Node 3 is drained by an administrator
first; its disk then fails and recovers too, and the administrator's drain and reason
stay as they were. ``hwagent slurm health`` prints node 2's problem while it lasts (exit
1, the same words as the drain reason) and nothing for node 1 (exit 0).
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.integration.slurm.agents import HWAGENT, RESOURCE, node_agents
from tests.integration.slurm.cluster import SlurmCluster, missing_binaries, multi_node_cluster

pytestmark = [
    pytest.mark.root,
    pytest.mark.bpf,
    pytest.mark.skipif(bool(missing_binaries()),
                       reason=f"no {', '.join(missing_binaries())}: scripts/setup.sh test installs slurm-wlm and munge"),
]

NAMES = ["n1", "n2", "n3"]
ADMIN_REASON = "admin: DIMM swap ticket 42"


def reasons(c: SlurmCluster) -> dict[str, str]:
    """``sinfo -R``: node -> reason, for the nodes that have one."""
    out = c.run(["sinfo", "-R", "-h", "-N", "-o", "%n|%E"]).stdout
    return {n: r for line in out.splitlines() for n, _, r in [line.partition("|")]}


def until(what: str, check, timeout: float = 60.0, pause: float = 0.05, logs=None):
    """``check()``'s first true answer; failing, the daemons' logs (``logs``: node -> NodeAgent) say why."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(pause)
    tails = "".join(f"\n--- hwagent on {n}:\n" + "\n".join(a.log().splitlines()[-25:])
                    for n, a in (logs or {}).items())
    raise AssertionError(f"no {what} within {timeout}s{tails}")


def node_fields(tmp) -> str:
    cfg = tmp / "empty.toml"
    cfg.write_text("")
    r = subprocess.run([sys.executable, "-m", "agent", "slurm", "conf", "--only", "node", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().split(" ", 1)[1]


def test_a_failing_disk_drains_its_node_only_and_only_hwagents_drain_is_resumed(short_tmp_path):
    with multi_node_cluster(short_tmp_path / "slurm", NAMES, node_fields(short_tmp_path)) as c, \
            node_agents(c, short_tmp_path / "agents", recovery_s=3.0) as agents:
        c.wait_registered()
        assert c.node_states() == {n: "idle none" for n in NAMES}
        healthy = agents["n1"].cli("slurm", "health")
        assert (healthy.returncode, healthy.stdout, healthy.stderr) == (0, "", "")

        admin = c.run(["scontrol", "update", "NodeName=n3", "State=DRAIN", f"Reason={ADMIN_REASON}"])
        assert admin.returncode == 0, admin.stderr
        agents["n3"].disk.fail()
        t0 = time.monotonic()
        agents["n2"].disk.fail()
        drained = until("n2 drained by hwagent", lambda: reasons(c).get("n2", "").startswith("hwagent: "),
                        logs=agents)
        latency = time.monotonic() - t0
        got = reasons(c)
        disk2 = agents["n2"].disk.name
        assert got["n2"].startswith(f"hwagent: {RESOURCE} {disk2} "), got
        assert "errno" in got["n2"], got
        assert "n1" not in got and got["n3"] == ADMIN_REASON, got
        assert c.node_states()["n2"].startswith("drained"), c.node_states()
        for n, a in agents.items():
            # each daemon named its own node: the host name of the namespace it runs in
            assert f'msg="slurm drain started" node={n} ' in a.log(), a.log()[-3000:]
        print(f"drain latency from the failed writes to sinfo -R: {latency:.2f}s ({drained})")

        # the health check says what the drain says, while it lasts
        sick = agents["n2"].cli("slurm", "health")
        assert sick.returncode == 1 and sick.stderr == "", sick
        assert sick.stdout.splitlines() == [got["n2"]], (sick.stdout, got)
        assert agents["n1"].cli("slurm", "health").returncode == 0

        # quiet for recovery_s: n2 resumed by hwagent, n3's administrator drain untouched
        until("n2 resumed", lambda: c.node_states().get("n2") == "idle none", timeout=60)
        agents["n3"].wait_for("node has another reason")
        until("n3's disk healthy again", lambda: agents["n3"].cli("slurm", "health").returncode == 0, timeout=60)
        time.sleep(1.5)  # three of the drain's rounds after n3's disk is healthy again
        got = reasons(c)
        assert got.get("n3") == ADMIN_REASON and "n2" not in got and "n1" not in got, (got, "\n".join(
            line for line in agents["n2"].log().splitlines() if "health" in line or "slurm" in line))
        assert c.node_states()["n3"].startswith("drained"), c.node_states()
        assert "slurm node resumed" not in agents["n3"].log() and "slurm node drained" not in agents["n3"].log()
        assert "slurm node drained" not in agents["n1"].log()
        for a in agents.values():
            assert "slurm drain call failed" not in a.log(), a.log()[-3000:]


def test_hwagent_slurm_health_as_slurmds_health_check_program_drains_and_resumes(short_tmp_path):
    """With the daemon's drain off (``[slurm] drain = false``), slurmd's own HealthCheckProgram,
    ``hwagent slurm health --drain`` run by each slurmd in its node's namespaces every 2 s,
    drains node 2 for its failing disk with the same reason and resumes it once healthy."""
    agents_dir = short_tmp_path / "agents"
    check = short_tmp_path / "hwagent-health-check"
    # slurmd runs the program with no arguments: which node it is on is the UTS namespace's host name
    check.write_text("#!/bin/sh\nn=$(/bin/hostname)\n"
                     f'exec {HWAGENT} slurm health --drain --config {agents_dir}/"$n"/agent/hwagent.toml '
                     f'--root-dir {agents_dir}/"$n"/agent/root\n')
    check.chmod(0o755)
    extra = (f"HealthCheckProgram={check}", "HealthCheckInterval=2", "HealthCheckNodeState=ANY")
    with multi_node_cluster(short_tmp_path / "slurm", NAMES, node_fields(short_tmp_path), extra_conf=extra) as c, \
            node_agents(c, agents_dir, recovery_s=10.0, slurm={"drain": "false"}) as agents:
        # the disk stays unhealthy for 10 s: several of slurmd's checks, however late the controller asks
        c.wait_registered()
        for a in agents.values():
            assert "component=slurm-drain" not in a.log()  # the daemon's drain is off: the check alone drains
        t0 = time.monotonic()
        agents["n2"].disk.fail()
        until("n2 drained by the health check", lambda: reasons(c).get("n2", "").startswith("hwagent: "), logs=agents)
        t1 = time.monotonic()
        got = reasons(c)
        assert got["n2"].startswith(f"hwagent: {RESOURCE} {agents['n2'].disk.name} "), got
        assert "n1" not in got and "n3" not in got, got
        until("n2 resumed by the health check", lambda: c.node_states().get("n2") == "idle none", timeout=60)
        print(f"health check: drained {t1 - t0:.1f}s after the failed writes, resumed {time.monotonic() - t1:.1f}s "
              "after that (HealthCheckInterval=2, recovery_s=10)")
        assert {n: s for n, s in c.node_states().items()} == {n: "idle none" for n in NAMES}


def test_hwagent_killed_and_restarted_keeps_no_state_and_asks_slurm_again(short_tmp_path):
    """kill -9 of node 2's hwagent while it holds node 2 drained changes nothing of Slurm's; the
    restarted daemon has seen no error on the disk since it started (its probe counts from
    zero), finds its own drain and resumes it, and the disk failing again drains the node again."""
    with multi_node_cluster(short_tmp_path / "slurm", NAMES, node_fields(short_tmp_path)) as c, \
            node_agents(c, short_tmp_path / "agents", recovery_s=60.0) as agents:
        c.wait_registered()
        n2 = agents["n2"]
        n2.disk.fail()
        until("n2 drained", lambda: reasons(c).get("n2", "").startswith("hwagent: "), logs=agents)
        first = reasons(c)["n2"]
        n2.kill()
        time.sleep(1.0)
        assert reasons(c).get("n2") == first  # a killed hwagent leaves the node as it was
        n2.restart()
        n2.wait_for('msg="pressure ready"')
        until("n2 resumed by the restarted hwagent", lambda: c.node_states().get("n2") == "idle none", logs=agents)
        n2.disk.fail()
        until("n2 drained again", lambda: reasons(c).get("n2", "").startswith("hwagent: "), logs=agents)
        assert c.node_states()["n1"] == "idle none" and c.node_states()["n3"] == "idle none"
