"""Starting test processes inside cgroups and removing the cgroups a test made, for
every tier (the VM guests import it too).

A process joins its cgroups before it execs, so it never runs outside them; the
joining is done by a shell in front of the command, not by a ``preexec_fn``: a
Python callback between fork and exec runs in a copy of the pytest process,
whose gRPC threads (from earlier tests) may be mid-call, and gRPC can abort
there (seen under load as a SIGABRT before exec).

A cgroup directory can be removed only once the kernel has let go of its last
task, which lags a SIGKILL by a moment: the rmdir is retried for a while rather
than failing the clean-up (or the next test) on a busy machine."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

#: sh -c SCRIPT sh PROCS... -- ARGV...: write its own pid into each cgroup.procs, then exec ARGV
_JOIN_THEN_EXEC = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


def spawn_in(dirs: Iterable[str | Path], argv: Sequence[str], **popen: Any) -> subprocess.Popen:
    """Start ``argv`` as a member of every cgroup directory in ``dirs`` (one per v1 controller,
    or one v2 directory); the returned process's pid is the command's own."""
    procs = [Path(d) / "cgroup.procs" for d in dirs]
    p = subprocess.Popen(["sh", "-c", _JOIN_THEN_EXEC, "sh", *map(str, procs), "--", *argv], **popen)
    # returned once it is a member of each, as a preexec_fn would have been
    deadline = time.monotonic() + 60
    while not all(str(p.pid) in f.read_text().split() for f in procs):
        if p.poll() is not None:
            raise RuntimeError(f"{argv[0]} exited ({p.returncode}) before joining {', '.join(map(str, procs))}")
        if time.monotonic() > deadline:
            p.kill()
            raise RuntimeError(f"{argv[0]} did not join {', '.join(map(str, procs))} within 60 s")
        time.sleep(0.005)
    return p


def rmdir_cgroup(path: str | Path, tries: int = 100, pause_s: float = 0.05) -> None:
    """Remove one (empty of children) cgroup directory; already gone is fine; still busy after
    ``tries`` attempts is left as it is."""
    for _ in range(tries):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(pause_s)


def rmdir_cgroup_tree(base: str | Path, tries: int = 100, pause_s: float = 0.05) -> None:
    """Remove ``base`` and every cgroup below it, deepest first."""
    for p, _dirs, _files in sorted(os.walk(base), key=lambda t: -len(t[0])):
        rmdir_cgroup(p, tries, pause_s)


def kill_and_remove_subtree(subtree: str, tries: int = 200, pause_s: float = 0.02) -> None:
    """End every process in the cgroup ``subtree`` (a path below each controller's mount,
    e.g. ``/hwagent-test-…``) in every hierarchy under /sys/fs/cgroup, then remove its
    directories deepest first: what a test that ran a daemon with its runtime leaves. The
    reclaimed pods' subtree the daemon derives from it (``<subtree>-reclaimed``) goes too."""
    from agent.cgroups.config import derived_reclaimed_subtree

    subtrees = (subtree, derived_reclaimed_subtree(subtree))
    for base in (ctl / sub.lstrip("/") for ctl in Path("/sys/fs/cgroup").iterdir() for sub in subtrees):
        if not base.is_dir():
            continue
        for p, _dirs, _files in os.walk(base):
            try:
                pids = Path(p, "cgroup.procs").read_text().split()
            except OSError:
                continue
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        rmdir_cgroup_tree(base, tries, pause_s)
