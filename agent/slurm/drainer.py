"""The drain component: the node's problems (``agent.slurm.health``) become a Slurm drain,
and hwagent's own drain is resumed once they are gone (docs/slurm.md, issue 35 part 3).

Every ``interval_s`` it reads the node's problems from their owners, on the loop
(the devices' health from ``DEVICE_PLUGINS``, the components' from the daemon): that
is a few values, no I/O. Only when they change, or every ``recheck_s`` (an
administrator resumed the node, slurmctld restarted and lost its state, hwagent
restarted), does it ask Slurm: ``scontrol show node -o NAME``, ``decide``
(``agent.slurm.drain``), then ``scontrol update`` if there is something to do, each in
an executor with a timeout (``agent.slurm.scontrol``). A failing scontrol is logged,
kept as ``last_error`` and tried again with a doubling pause up to ``recheck_s``; it
never stops the daemon and never drains the node by itself.

Looks up ``DEVICE_PLUGINS``; publishes nothing. On with ``[slurm] enabled`` and
``drain`` (the default when Slurm mode is on).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.contracts import DEVICE_PLUGINS, DevicePlugins
from agent.eventlog import get_logger
from agent.slurm.drain import Action, Decision, decide
from agent.slurm.health import Problem, node_problems
from agent.slurm.scontrol import Scontrol, ScontrolError

if TYPE_CHECKING:
    from agent.config import Config
    from agent.contracts import DaemonContext

__all__ = ["DrainSettings", "SlurmDrain", "factory"]

log = get_logger("hwagent.slurm")


@dataclass(frozen=True)
class DrainSettings:
    """The ``[slurm]`` keys the drain reads (agent.slurm.config)."""

    node_name: str
    bin_dir: str = "/usr/bin"
    slurm_conf: str = ""
    #: seconds between reads of the node's problems (no I/O)
    interval_s: float = 0.5
    #: seconds between asking Slurm when nothing changed here
    recheck_s: float = 60.0
    #: seconds one scontrol call may take
    timeout_s: float = 10.0

    @classmethod
    def from_config(cls, config: Config) -> DrainSettings:
        from agent.slurm.config import SLURM_SECTION

        s = config[SLURM_SECTION]
        return cls(node_name=s.node_name or socket.gethostname().split(".")[0], bin_dir=s.bin_dir,
                   slurm_conf=s.slurm_conf, interval_s=s.drain_interval_s, recheck_s=s.drain_recheck_s,
                   timeout_s=s.query_timeout_s)


class SlurmDrain:
    name = "slurm-drain"

    def __init__(self, settings: DrainSettings, scontrol: Scontrol | None = None) -> None:
        self.settings = settings
        self.scontrol = scontrol or Scontrol(settings.bin_dir, settings.slurm_conf, settings.timeout_s)
        self._plugins: DevicePlugins | None = None
        self._components: Callable[[], list[tuple[str, bool]]] | None = None
        self._task: asyncio.Task[None] | None = None
        #: the problems Slurm was last brought in line with (None: not yet)
        self.applied: tuple[Problem, ...] | None = None
        self.last_decision: Decision | None = None
        self.last_error = ""
        self._recheck_at = 0.0
        self._retry_at = 0.0
        self._backoff = settings.interval_s

    def problems(self) -> tuple[Problem, ...]:
        plugins = self._plugins
        states = [*plugins.plugin_states(), *plugins.dra_states()] if plugins is not None else []
        return node_problems(states, self._components() if self._components is not None else ())

    async def start(self, ctx: DaemonContext) -> None:
        self._plugins = ctx.lookup(DEVICE_PLUGINS)
        self._components = ctx.component_health
        if self._plugins is None:
            log.warning("slurm drain without device plugins", node=self.settings.node_name,
                        note="[devices] is off: only the pressure probes' own health is watched")
        self._task = asyncio.get_running_loop().create_task(self._run(), name="slurm-drain")
        log.info("slurm drain started", node=self.settings.node_name, scontrol=self.scontrol.path,
                 interval_s=self.settings.interval_s, recheck_s=self.settings.recheck_s)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def healthy(self) -> bool:
        """Always: trouble reaching Slurm is logged and retried, never the node's problem."""
        return True

    async def _run(self) -> None:
        while True:
            await self.tick()
            await asyncio.sleep(self.settings.interval_s)

    async def tick(self) -> Decision | None:
        """Read the problems; bring Slurm in line when they changed or a recheck is due."""
        now = time.monotonic()
        problems = self.problems()
        if now < self._retry_at or (problems == self.applied and now < self._recheck_at):
            return None
        try:
            decision = await self.reconcile(problems)
        except ScontrolError as e:
            self.last_error = str(e)
            self._retry_at = now + self._backoff
            self._backoff = min(self._backoff * 2, self.settings.recheck_s)
            log.error("slurm drain call failed", node=self.settings.node_name, error=str(e),
                      retry_in_s=round(self._retry_at - now, 2))
            return None
        self.applied, self.last_error = problems, ""
        self._recheck_at, self._backoff, self._retry_at = now + self.settings.recheck_s, self.settings.interval_s, 0.0
        return decision

    async def reconcile(self, problems: tuple[Problem, ...]) -> Decision:
        """Ask Slurm for the node, decide, and carry the decision out (scontrol in an executor)."""
        loop = asyncio.get_running_loop()
        name = self.settings.node_name
        node = await loop.run_in_executor(None, self.scontrol.show_node, name)
        decision = decide(node, problems)
        if decision.action is Action.DRAIN:
            await loop.run_in_executor(None, self.scontrol.drain, name, decision.reason)
            log.warning("slurm node drained", node=name, reason=decision.reason, why=decision.why)
        elif decision.action is Action.RESUME:
            await loop.run_in_executor(None, self.scontrol.resume, name)
            log.warning("slurm node resumed", node=name, was=node.reason, why=decision.why)
        elif decision != self.last_decision:
            log.info("slurm drain unchanged", node=name, state="+".join([node.base, *sorted(node.flags)]),
                     reason=node.reason or "-", problems=len(problems), why=decision.why)
        self.last_decision = decision
        return decision


def factory(ctx: DaemonContext) -> SlurmDrain | None:
    from agent.slurm.config import SLURM_SECTION

    s = ctx.config[SLURM_SECTION]
    if not s.enabled or not s.drain:
        return None
    return SlurmDrain(DrainSettings.from_config(ctx.config))
