"""The exit statuses of `hwagent` commands, in one place, so scripts can tell outcomes apart.

Errors a person reads as one line on stderr; a script reads the status. The
table ``EXIT_CODES`` is what ``docs/commands/README.md`` prints (the manual
generator renders it), so a code added here is documented where the commands are.

``launch --wait`` passes the job's own status through (0-255, ``128+N`` when
signal N ended it, as a shell does); the outcomes where the job gave no status
of its own get codes from 200 up, above every ``128+signal`` (signals end at
64), so a script can tell "the job was OOM-killed" from "the job exited 137".
"""

from __future__ import annotations

__all__ = [
    "EXIT_OK", "EXIT_REFUSED", "EXIT_USAGE", "EXIT_NOT_FOUND", "EXIT_EXISTS", "EXIT_NO_DAEMON",
    "EXIT_START_FAILED", "EXIT_OOM", "EXIT_EVICTED", "EXIT_LOST", "EXIT_INTERRUPTED", "EXIT_CODES",
]

EXIT_OK = 0
#: the daemon refused or failed the request (an invalid manifest, no room on the node, ...)
EXIT_REFUSED = 1
#: the command line is wrong (argparse's own status)
EXIT_USAGE = 2
#: no such pod
EXIT_NOT_FOUND = 3
#: a pod of that name already exists
EXIT_EXISTS = 4
#: no daemon answers on the socket
EXIT_NO_DAEMON = 5
#: launch --wait: the pod failed to start (StartError, an init container failed)
EXIT_START_FAILED = 200
#: launch --wait: the main container was killed for memory (OOMKilled)
EXIT_OOM = 201
#: launch --wait: the pod was evicted (pressure)
EXIT_EVICTED = 202
#: launch --wait: the pod ended without its main container's status (removed, or stopped before it ran)
EXIT_LOST = 203
#: interrupted (Ctrl-C) outside a --wait (which reports the job's status instead)
EXIT_INTERRUPTED = 130

EXIT_CODES: tuple[tuple[str, str], ...] = (
    ("0", "success"),
    ("1", "the daemon refused or failed the request; the message says why and what to do"),
    ("2", "usage error: a wrong flag or argument"),
    ("3", "no such pod"),
    ("4", "a pod of that name already exists (`hwagent rm NAME` first)"),
    ("5", "the daemon is not running (no answer on its admission socket)"),
    ("0-255", "`launch --wait`: the main container's exit status (128+N when signal N ended it)"),
    ("200", "`launch --wait`: the pod failed to start (StartError, or an init container failed)"),
    ("201", "`launch --wait`: the main container was killed for memory (OOMKilled)"),
    ("202", "`launch --wait`: the pod was evicted"),
    ("203", "`launch --wait`: the pod ended without a status of its main container (removed, or stopped "
            "before it ran)"),
    ("130", "interrupted by Ctrl-C (outside `launch --wait`)"),
)
