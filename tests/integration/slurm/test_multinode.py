"""Three slurmd nodes, each in its own network and UTS namespace on a test bridge, registered by
a slurmctld with hwagent's node line, and one job step across all three (issue 35's peer).

The nodes share this machine's hardware, so each gets the line `hwagent slurm conf` prints
here; each must register idle without slurmd logging "Node configuration differs from
hardware", and `srun -N3` must run one task on each, every one seeing its own node's host
name. The later parts (hwagent naming every node's steps, draining node 2) build on this.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.slurm.cluster import missing_binaries, multi_node_cluster

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(bool(missing_binaries()),
                       reason=f"no {', '.join(missing_binaries())}: scripts/setup.sh test installs slurm-wlm and munge"),
]

NAMES = ["n1", "n2", "n3"]


def test_three_namespaced_nodes_register_and_run_a_step_each(short_tmp_path):
    cfg = short_tmp_path / "empty.toml"
    cfg.write_text("")
    r = subprocess.run([sys.executable, "-m", "agent", "slurm", "conf", "--only", "node", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    fields = r.stdout.strip().split(" ", 1)[1]
    with multi_node_cluster(short_tmp_path / "slurm", NAMES, fields) as c:
        c.wait_registered()
        assert c.node_states() == {n: "idle none" for n in NAMES}
        job = c.run(["srun", "-N3", "-l", "sh", "-c", "hostname; echo $SLURMD_NODENAME"], timeout=60)
        assert job.returncode == 0, job.stderr
        by_task: dict[str, list[str]] = {}
        for line in job.stdout.splitlines():
            task, _, text = line.partition(": ")
            by_task.setdefault(task.strip(), []).append(text.strip())
        # each task ran on its own node, whose UTS namespace carries the node's name
        assert sorted(tuple(v) for v in by_task.values()) == [(n, n) for n in NAMES]
        for n in NAMES:
            log = c.log("slurmd", n)
            assert "slurmd started" in log and "differs from hardware" not in log, log[-2000:]
