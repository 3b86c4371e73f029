"""The real slurmctld accepts the node `hwagent slurm conf` describes (issue 35 part 1).

A munged, a slurmctld and a slurmd (Debian's slurm-wlm 22.05) run on this machine under
a test-owned directory with free ports (tests/integration/slurm/cluster.py). slurm.conf
holds hwagent's GresTypes= and NodeName= lines as printed, gres.conf hwagent's gres.conf
lines for a loop device a config rule offers. The node must register idle, with no
drain reason and without slurmd logging "Node configuration differs from hardware",
and a job asking for the GRES must run; hwagent's reserved CPU and memory arrive as Slurm's
specialised core and MemSpecLimit. A control run with a node line that claims one
core more than the machine has is drained, so the check can tell a wrong line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.devices.kernel import loop_device
from tests.integration.slurm.cluster import missing_binaries, slurm_cluster

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(bool(missing_binaries()),
                       reason=f"no {', '.join(missing_binaries())}: scripts/setup.sh test installs slurm-wlm and munge"),
]

LOOP_N = 231
DIFFERS = "Node configuration differs from hardware"


def _hwagent_conf(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent", "slurm", "conf", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def scratch_config(short_tmp_path):
    """A config offering /dev/loop231 as example.com/scratch (no other rule), with one CPU and
    1 GiB of memory reserved for the system."""
    cfg = short_tmp_path / "hwagent.toml"
    cfg.write_text('[cpu]\nreserved_cpus = 1\n[memory]\nreserved_memory = ["0:memory=1Gi"]\n'
                   '[devices]\ndefault_rules = false\n'
                   f'[[devices.resources]]\nname = "example.com/scratch"\nblock_name = ["loop{LOOP_N}"]\n')
    with loop_device(LOOP_N):
        yield cfg


def test_slurmctld_accepts_hwagents_node_and_gres(scratch_config, short_tmp_path):
    r = _hwagent_conf(scratch_config)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    types = next(x for x in lines if x.startswith("GresTypes="))
    node = next(x for x in lines if x.startswith("NodeName=") and " CPUs=" in x)
    gres = [x for x in lines if x.startswith("NodeName=") and " Name=" in x]
    assert types == "GresTypes=scratch"
    assert node.endswith(" Gres=scratch:1")
    assert " CpuSpecList=" in node and " MemSpecLimit=1024 " in node
    assert len(gres) == 1 and f"Name=scratch File=/dev/loop{LOOP_N}" in gres[0]

    with slurm_cluster(short_tmp_path / "slurm", node, "\n".join(gres) + "\n", ("scratch",)) as c:
        state = c.wait_registered()
        assert state == "idle none", c.log("slurmctld")[-3000:]
        show = c.run(["scontrol", "show", "node", c.node_name]).stdout
        assert "Gres=scratch:1" in show and "Reason=" not in show, show
        # the reservations arrived: one core specialised (CpuSpecList widens to whole cores)
        assert "CoreSpecCount=1" in show and "MemSpecLimit=1024" in show, show
        job = c.run(["srun", "-N1", "--gres=scratch:1", "true"], timeout=60)
        assert job.returncode == 0, job.stderr
        # the count is the one hwagent wrote: two are not there
        too_many = c.run(["srun", "-N1", "--immediate=5", "--gres=scratch:2", "true"], timeout=60)
        assert too_many.returncode != 0
        assert "slurmd started" in c.log("slurmd")  # the log read is the node's
        assert DIFFERS not in c.log("slurmd")
        assert "Low " not in c.log("slurmctld")


def test_control_a_line_claiming_more_cores_is_drained(scratch_config, short_tmp_path):
    node = _hwagent_conf(scratch_config, "--only", "node").stdout.strip()
    fields = dict(kv.split("=", 1) for kv in node.split())
    cores = int(fields["CoresPerSocket"])
    cpus = int(fields["CPUs"])
    threads = int(fields["ThreadsPerCore"])
    sockets = int(fields["SocketsPerBoard"])
    wrong = (node.replace(f"CoresPerSocket={cores}", f"CoresPerSocket={cores + 1}")
             .replace(f"CPUs={cpus}", f"CPUs={sockets * (cores + 1) * threads}")
             .replace(" Gres=scratch:1", ""))
    with slurm_cluster(short_tmp_path / "slurm", wrong) as c:
        state = c.wait_registered()
        # slurmd reports the 2 cores it counts (it takes the hardware's figures when they are lower
        # than the line's, so it logs no difference), slurmctld drains the node for them
        assert state.startswith(("drain", "inval")) and "Low socket*core*thread count" in state, state


def test_stopped_cluster_leaves_no_daemon(scratch_config, short_tmp_path):
    node = _hwagent_conf(scratch_config, "--only", "node").stdout.strip()
    with slurm_cluster(short_tmp_path / "slurm", node) as c:
        c.wait_registered()
        pids = [p.pid for p in c.procs.values()]
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in Path(f"/proc/{pid}/status").read_text()


def test_numa_local_gres_cores_are_accepted_and_enforced(scratch_config, short_tmp_path):
    """This machine's devices have no NUMA node (a VM), so hwagent writes no Cores= for them; the
    same loop device placed on node 0 gives the line a NUMA-local device gets (Cores= in Slurm's
    numbering of this machine's cores), which slurmd must parse (it exits on a core it lacks)
    and slurmctld must schedule with --gres-flags=enforce-binding."""
    from dataclasses import replace

    from agent.devices.config import ResourceRule
    from agent.devices.model import Inventory
    from agent.devices.rules import assign
    from agent.devices.sysfs import read_inventory
    from agent.slurm.gres import gres_conf, render_gres_line
    from agent.topology.sysfs import read_topology

    topo = read_topology("/sys", "/proc", log_warnings=False)
    live = read_inventory("/sys", "/dev").get(f"loop{LOOP_N}")
    assert live is not None and live.numa_node is None
    inv = Inventory({live.id: replace(live, numa_node=0)})
    rules = (ResourceRule(name="example.com/scratch", block_name=(f"loop{LOOP_N}",)),)
    g = gres_conf(topo, inv, assign(inv, rules), rules)
    node = _hwagent_conf(scratch_config, "--only", "node").stdout.strip()
    line = render_gres_line(node.split()[0].split("=", 1)[1], g.lines[0])
    assert f" Cores=0-{len(topo.cores) - 1}" in line if len(topo.cores) > 1 else " Cores=0" in line
    with slurm_cluster(short_tmp_path / "slurm", node, line + "\n", ("scratch",)) as c:
        assert c.wait_registered() == "idle none"
        show = c.run(["scontrol", "show", "node", c.node_name]).stdout
        assert "Gres=scratch:1(S:0)" in show, show  # bound to socket 0, from Cores=
        job = c.run(["srun", "-N1", "--gres=scratch:1", "--gres-flags=enforce-binding", "true"], timeout=60)
        assert job.returncode == 0, job.stderr
