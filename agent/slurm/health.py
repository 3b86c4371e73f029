"""What hwagent counts as a problem of this node, in words Slurm's drain reason and
``HealthCheckProgram`` lines can carry (docs/slurm.md, issue 35 part 3).

One definition for both doors: the daemon's drain (``agent.slurm.drainer``) and
``hwagent slurm health`` (through the status socket's ``health`` view) call
``node_problems`` over the same values, so the node is drained for exactly the
lines the health check prints. Pure: the owners' values in, problems out.

A problem is a device one of hwagent's rules offers that is unhealthy now (its
probes' verdicts and the rule's own, as the device plugins serve them), or one of
the components that watch the devices (``DEVICE_WATCHERS``: the device plugins,
the pressure probes) reporting itself unhealthy: the devices' health is then not
known. Other components' trouble (the Slurm jobs' walk, the drain's own calls to
slurmctld, the CPU policy) is hwagent's, not the node's hardware's: ``hwagent
status`` and /healthz say it, and it drains nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from agent.contracts.plugins import PluginState

__all__ = ["Problem", "node_problems", "problem_line", "DEVICE_WATCHERS", "REASON_PREFIX"]

#: how every drain reason and health line of hwagent's begins: the mark of hwagent's own drain
REASON_PREFIX = "hwagent: "

#: the components whose failure leaves the devices' health unknown (their names in the daemon)
DEVICE_WATCHERS = frozenset({"deviceplugins", "pressure"})

#: anything but printable ASCII is replaced: a reason travels as one argv word to scontrol and
#: as one line of a health check's output
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]+")


def _clean(text: str) -> str:
    return " ".join(_UNPRINTABLE.sub(" ", text).split())


@dataclass(frozen=True, order=True)
class Problem:
    """``subject`` (``<resource> <device>`` or ``component <name>``) and why it is a problem."""

    subject: str
    why: str

    def text(self) -> str:
        """``<subject> <why>``, printable and on one line."""
        return _clean(f"{self.subject} {self.why}")


def node_problems(plugins: Iterable[PluginState], components: Iterable[tuple[str, bool]] = ()) -> tuple[Problem, ...]:
    """The node's problems, sorted (so the same situation always reads the same): each
    unhealthy device of ``plugins`` (every resource hwagent offers, plugin or DRA) and each
    unhealthy device watcher among ``components`` ((name, healthy) as the daemon reports them)."""
    out = [Problem(f"{st.resource} {d.id}", d.reason or "unhealthy")
           for st in plugins for d in st.devices if not d.healthy]
    out += [Problem(f"component {name}", "unhealthy") for name, ok in components
            if not ok and name in DEVICE_WATCHERS]
    return tuple(sorted(set(out)))


def problem_line(problem: Problem) -> str:
    """One line of ``hwagent slurm health``'s output: ``hwagent: <subject> <why>``."""
    return REASON_PREFIX + problem.text()
