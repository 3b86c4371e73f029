"""What a config reload (SIGHUP) may change in a running daemon, decided as pure data.

The daemon re-reads the file (CLI flags still override it), and this module
compares the result with the config in effect: settings a part of the daemon can
take while running are applied, the rest are reported as needing a restart and
stay as they were, so the config in effect is always one the daemon runs by.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.config import Config, ConfigError

__all__ = ["ReloadPlan", "plan_reload", "DAEMON_LIVE_SETTINGS"]

#: [daemon] settings the daemon applies itself while running
DAEMON_LIVE_SETTINGS = frozenset({"log_level"})


@dataclass(frozen=True)
class ReloadPlan:
    #: the config to run by from now on: the old one with every live change applied
    effective: Config
    #: "section.key" applied live
    applied: tuple[str, ...]
    #: "section.key" changed in the file but only taken at the next start
    needs_restart: tuple[str, ...]
    #: sections with live changes, to hand to their owners
    live_sections: tuple[str, ...]


def _changed(old: Any, new: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(old) if getattr(old, f.name) != getattr(new, f.name)]


def plan_reload(running: Config, loaded: Config, live: Mapping[str, frozenset[str]]) -> ReloadPlan:
    """``live``: section -> the settings that section's owner takes while running."""
    sections = dict(running.sections)
    applied: list[str] = []
    restart: list[str] = []
    live_sections: list[str] = []
    for name, old in running.sections.items():
        new = loaded.sections.get(name, old)
        changed = _changed(old, new)
        if not changed:
            continue
        take = {k: getattr(new, k) for k in changed if k in live.get(name, frozenset())}
        restart += [f"{name}.{k}" for k in changed if k not in take]
        if take:
            merged = dataclasses.replace(old, **take)
            validate = getattr(merged, "validate", None)
            if callable(validate):
                try:
                    validate()  # live keys taken beside old restart-only ones must still agree
                except ValueError as e:
                    raise ConfigError(f"{name}: {e} (with the settings that need a restart kept)") from None
            sections[name] = merged
            applied += [f"{name}.{k}" for k in take]
            live_sections.append(name)
    return ReloadPlan(Config(sections, loaded.path or running.path), tuple(applied), tuple(restart),
                      tuple(live_sections))
