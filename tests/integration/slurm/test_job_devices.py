"""The devices a Slurm job holds, named with their health in its node's hwagent (issue 35 part 2).

Two loop devices offered by a hwagent rule become two GPU records in gres.conf (``hwagent
slurm conf --gres-name example.com/scratch=gpu``: Slurm constrains devices only for GRES it
has a plugin for, and gres/gpu takes any file), the second line first, so slurmd's order is
not the devices' numbers. Slurm then gives each ``--gres=gpu:1`` job one of them and denies
it the other (task/cgroup's ConstrainDevices): which one the job may open is Slurm's own
answer, read by the job itself. hwagent must name that device, and not the other, as held
by that job (from ``scontrol show job -d``'s GRES index and ``slurmd -G``'s records).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.devices.kernel import loop_device
from tests.integration.runtime.test_end_to_end import until
from tests.integration.slurm.cluster import missing_binaries, slurm_cluster
from tests.integration.slurm.jobagent import job_agent

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(bool(missing_binaries()),
                       reason=f"no {', '.join(missing_binaries())}: scripts/setup.sh test installs slurm-wlm and munge"),
]

LOOPS = (237, 238)
RULES = ('default_rules = false\n[[devices.resources]]\nname = "example.com/scratch"\n'
         f'block_name = ["loop{LOOPS[0]}", "loop{LOOPS[1]}"]\n')


def test_a_jobs_gpu_is_the_device_hwagent_names_as_held_by_it(short_tmp_path):
    cfg = short_tmp_path / "rules.toml"
    cfg.write_text(f"[devices]\n{RULES}")
    with loop_device(LOOPS[0]), loop_device(LOOPS[1]):
        r = subprocess.run([sys.executable, "-m", "agent", "slurm", "conf", "--config", str(cfg),
                            "--gres-name", "example.com/scratch=gpu"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        node = next(x for x in lines if x.startswith("NodeName=") and " CPUs=" in x)
        gres = [x for x in lines if x.startswith("NodeName=") and " Name=gpu " in x]
        assert len(gres) == 2, r.stdout
        with slurm_cluster(short_tmp_path / "slurm", node, "\n".join(reversed(gres)) + "\n", ("gpu",),
                           cgroups=True) as c:
            assert c.wait_registered() == "idle none"
            with job_agent(short_tmp_path / "hw", c, c.node_name, RULES) as hw:
                out = short_tmp_path / "opened"
                probe = " ".join(f"/dev/loop{n}" for n in LOOPS)
                srun = subprocess.Popen(
                    ["srun", "-N1", "-J", "gpujob", "--gres=gpu:1", "sh", "-c",
                     f"for d in {probe}; do dd if=$d of=/dev/null count=1 2>/dev/null && echo $d; done > {out}.tmp;"
                     f" mv {out}.tmp {out}; sleep 30"], env=c.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                try:
                    until(lambda: out.exists(), "the job to say which device it may open")
                    opened = out.read_text().split()
                    assert len(opened) == 1, opened  # Slurm gave it one and denied it the other
                    mine = opened[0].removeprefix("/dev/")
                    job = c.run(["squeue", "-h", "-n", "gpujob", "-o", "%A"]).stdout.strip()

                    def named() -> dict:
                        return {(lb["job"], lb["resource"], lb["device_id"]): v
                                for lb, v in hw.metrics().get("hwagent_slurm_job_device_healthy", [])}

                    until(lambda: (job, "example.com/scratch", mine) in named(), f"hwagent to name {mine} held by {job}",
                          hw.daemon)
                    got = named()
                    assert got == {(job, "example.com/scratch", mine): 1.0}, got
                    labels = next(lb for lb, _ in hw.metrics()["hwagent_slurm_job_device_healthy"])
                    assert (labels["user"], labels["partition"]) == ("root", "test")
                finally:
                    c.run(["scancel", "-n", "gpujob"])
                    srun.wait(30)
