"""Device nodes of a non-root workload's own: the granted devices, openable by its user.

A device plugin (or CDI spec) grants a node such as ``/dev/nvme1n1``, and the
devices rules let the container open it, but the host's node is ``root:disk
0660``: a workload running as a user (agent.workloads.users) gets EACCES. The
host's node must not change (every other user of the machine would gain it), so
for such a workload the runtime makes a node with the same type and numbers in
the container's state directory (root-only, removed with it), owned by the
workload's user, mode 0600, and binds it over the granted path in the workload's
private mount namespace. What the user can reach is still what the devices rules
allow: the node only lifts the file-mode check, for this container alone.

The plan decides which nodes (``plan.UserNode``, pure); this makes them.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from agent.contracts.pods import RunAs
from agent.runtime.plan import UserNode

__all__ = ["make_user_nodes"]


def make_user_nodes(directory: Path, nodes: Sequence[UserNode], user: RunAs) -> list[tuple[str, str, bool]]:
    """Make each node under ``directory`` (which exists) for ``user``; the (source, target, read_only)
    binds that put them at their container paths. OSError (with the path) when one cannot be made."""
    if user.uid is None or user.gid is None:
        raise ValueError(f"device nodes for an incomplete user (uid {user.uid}, gid {user.gid})")
    binds: list[tuple[str, str, bool]] = []
    for i, node in enumerate(nodes):
        path = directory / f"dev{i}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a restart of the container: made again, as the plan says now
        kind = stat.S_IFCHR if node.kind == "c" else stat.S_IFBLK
        os.mknod(path, kind | 0o600, os.makedev(node.major, node.minor))
        os.chown(path, user.uid, user.gid, follow_symlinks=False)
        binds.append((str(path), node.container_path, False))
    return binds
