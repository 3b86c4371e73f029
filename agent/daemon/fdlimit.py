"""The daemon's descriptor limit, raised at start.

Why: users' connections are lent descriptors out of this limit less a reserve for the daemon's
own work (``agent.workloads.connlimit``), so the daemon starts with all the kernel lets it
have: the soft limit raised to the hard one, as systemd's ``LimitNOFILE`` and most daemons do.
Nothing in the daemon uses select(), which the raise could break past 1024.
"""

from __future__ import annotations

import resource

from agent.eventlog import get_logger

__all__ = ["raise_nofile"]

log = get_logger("hwagent")


def raise_nofile() -> tuple[int, int]:
    """Raise this process's soft descriptor limit to its hard limit (as systemd's ``LimitNOFILE``
    and most daemons do at start: select() is not used anywhere) and answer (soft, hard) after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as e:
            log.warning("cannot raise the descriptor limit", soft=soft, hard=hard, error=e)
    return soft, hard
