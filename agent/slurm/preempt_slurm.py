"""Handing a preemptible job back to Slurm: ``scontrol requeue`` or ``scancel`` (thin I/O, blocking).

hwagent never signals a job's processes itself: Slurm requeues the job (ending its
steps its own way, ``KillWait`` included, and counting the restart in its record) or
cancels it, or signals it with a signal the job may catch (``scancel --signal=USR1 --full``:
the batch script and every step get it; the job checkpoints and exits, or not: it decides). The job id is the cgroup's number (digits only, read by the
layout); the programs run with a clean environment (``PATH`` of ``bin_dir``, ``LANG=C``,
``SLURM_CONF`` when configured), as the other Slurm clients do (agent.slurm.jobinfo).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from agent.slurm.jobinfo import run_command

__all__ = ["HandBack", "hand_back_argv"]


def hand_back_argv(bin_dir: str, action: str, signal: str, job: str) -> list[str]:
    """The command that hands ``job`` back (pure)."""
    if not job.isdigit():
        raise ValueError(f"not a Slurm job id: {job!r}")
    if action == "requeue":
        return [os.path.join(bin_dir, "scontrol"), "requeue", job]
    if action == "cancel":
        # --full: the batch script and its children get the signal too (scancel leaves the batch
        # step out otherwise, and a plain sbatch job has no other step)
        return [os.path.join(bin_dir, "scancel"), *((f"--signal={signal}", "--full") if signal else ()), job]
    raise ValueError(f"unknown hand-back action {action!r}")


@dataclass(frozen=True)
class HandBack:
    bin_dir: str
    slurm_conf: str
    action: str
    signal: str = ""
    timeout_s: float = 10.0

    def __call__(self, job: str) -> None:
        """Ask Slurm; OSError (naming the command and what Slurm said) when it refuses or is not there."""
        env = {"PATH": self.bin_dir, "LANG": "C", **({"SLURM_CONF": self.slurm_conf} if self.slurm_conf else {})}
        argv = hand_back_argv(self.bin_dir, self.action, self.signal, job)
        try:
            run_command(argv, env, self.timeout_s)
        except subprocess.SubprocessError as e:
            raise OSError(f"{' '.join(argv)}: {e}") from None
