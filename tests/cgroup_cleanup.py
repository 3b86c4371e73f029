"""Removing the cgroups a test made, for every tier (the VM guests import it too).

A cgroup directory can be removed only once the kernel has let go of its last
task, which lags a SIGKILL by a moment: the rmdir is retried for a while rather
than failing the clean-up (or the next test) on a busy machine."""

from __future__ import annotations

import os
import time
from pathlib import Path


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
