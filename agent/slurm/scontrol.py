"""The thin adapter over ``scontrol`` for the drain: read one node, drain it, resume it.

Blocking (a subprocess with a timeout): the drain component calls it in an executor,
never on the daemon's loop. scontrol runs with a clean environment (``PATH`` of the
configured ``bin_dir`` only, ``LANG=C``, ``SLURM_CONF`` when configured), as the other
Slurm readers do (agent.slurm.jobinfo): nothing of the daemon's environment reaches it.
Every failure is a ``ScontrolError`` whose message names the command and what it said.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from agent.slurm.drain import NodeState, NodeStateError, parse_show_node

__all__ = ["Scontrol", "ScontrolError"]


class ScontrolError(Exception):
    """scontrol could not be run, did not answer in time, or refused (the message says which)."""


@dataclass(frozen=True)
class Scontrol:
    bin_dir: str = "/usr/bin"
    slurm_conf: str = ""
    timeout_s: float = 10.0

    @property
    def path(self) -> str:
        return os.path.join(self.bin_dir, "scontrol")

    @property
    def env(self) -> dict[str, str]:
        return {"PATH": self.bin_dir, "LANG": "C", **({"SLURM_CONF": self.slurm_conf} if self.slurm_conf else {})}

    def _run(self, *args: str) -> str:
        argv = [self.path, *args]
        shown = " ".join(argv)
        try:
            r = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=self.timeout_s,
                               stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise ScontrolError(f"no scontrol at {self.path} (set [slurm] bin_dir)") from None
        except subprocess.TimeoutExpired:
            raise ScontrolError(f"{shown}: no answer within {self.timeout_s:g}s") from None
        except OSError as e:
            raise ScontrolError(f"{shown}: {e}") from None
        if r.returncode != 0:
            said = (r.stderr.strip() or r.stdout.strip() or "no output").splitlines()[-1][:300]
            raise ScontrolError(f"{shown}: exit {r.returncode}: {said}")
        return r.stdout

    def show_node(self, name: str) -> NodeState:
        """``scontrol show node -o NAME``, parsed."""
        text = self._run("show", "node", "-o", name)
        try:
            return parse_show_node(text, name)
        except NodeStateError as e:
            raise ScontrolError(f"scontrol show node {name}: {e}") from None

    def drain(self, name: str, reason: str) -> None:
        self._run("update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}")

    def resume(self, name: str) -> None:
        self._run("update", f"NodeName={name}", "State=RESUME")
