"""No module outside agent/cgroups opens cgroupfs or reads the mount table.

Issue 11's rule ("cgroupfs access only in agent/cgroups"), kept by walking the
package's syntax trees: a string literal that names a cgroupfs mount, a cgroup
control file, or the kernel's mount table, anywhere outside agent/cgroups (and
the generated agent/api), is a way around the cgroup layer's path checks. Doc
strings are prose and may name them; comments are not in the tree at all.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "agent"
ALLOWED = ("cgroups", "api")

#: literals that only code reading or writing cgroupfs has a reason to hold
CGROUPFS_NAMES = (
    "/sys/fs/cgroup",
    "cgroup.procs",
    "cgroup.threads",
    "cgroup.kill",
    "cgroup.controllers",
    "cgroup.subtree_control",
    "cgroup.events",
    "cpuset.cpus",
    "cpuset.mems",
    "cpuset.effective_cpus",
    "cpu.idle",
    "cpu.max",
    "cpu.weight",
    "cpu.shares",
    "cpu.cfs_quota_us",
    "cpu.cfs_period_us",
    "memory.max",
    "memory.limit_in_bytes",
    "pids.max",
    "devices.allow",
    "devices.deny",
    "notify_on_release",
)
#: the kernel's mount tables: only agent.cgroups.mounts parses them
MOUNT_TABLES = ("/proc/mounts", "self/mounts", "mountinfo")
#: a name used as a path (the whole literal, or a component of one): "cpu.idle writes
#: on the reclaimed cgroup" in a metric's help text is prose, "cpu/x/cpu.idle" is not
_AS_PATH = re.compile("(?:^|/)(?:" + "|".join(map(re.escape, CGROUPFS_NAMES + MOUNT_TABLES)) + r")(?:$|[/.])")
#: path components that mean cgroupfs or a mount table only when joined into a path
#: (``Path(root) / "fs" / "cgroup"``, ``os.path.join(procfs_root, "mounts")``); a
#: container spec's "mounts" key is not one
_PARTS = {"cgroup", "mounts", "mountinfo"}
_JOINS = {"join", "joinpath", "rooted", "Path", "PurePath"}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _joined_parts(tree: ast.AST) -> set[int]:
    """ids of string constants that are operands of ``/`` or arguments of a path join."""
    out = set()
    for node in ast.walk(tree):
        operands: list[ast.expr] = []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            operands = [node.left, node.right]
        elif isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name in _JOINS:
                operands = list(node.args)
        out.update(id(o) for o in operands if isinstance(o, ast.Constant))
    return out


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    joined = _joined_parts(tree)
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docs:
            continue
        text = node.value
        hits = [m.group(0).strip("/.") for m in _AS_PATH.finditer(text)]
        if id(node) in joined and text in _PARTS:
            hits.append(text)
        if hits:
            out.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {text[:60]!r} names {', '.join(hits)}")
    return out


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in ALLOWED)


def test_no_cgroupfs_access_outside_the_cgroup_layer() -> None:
    offences = [o for p in _modules() for o in _offences(p)]
    assert not offences, "cgroupfs paths belong in agent/cgroups:\n" + "\n".join(offences)


@pytest.mark.parametrize(
    "source",
    [
        'open("/sys/fs/cgroup/cpu/x/cgroup.procs")',
        'p = root / "cpuset.cpus"',
        'os.path.join(procfs_root, "mounts")',
        'Path("/proc/self/mountinfo").read_text()',
        'CPU_IDLE = "cpu.idle"',
        'cg = Path(sysfs_root) / "fs" / "cgroup"',
        'v1 = {"cpuset": ("cpuset.cpus.effective", "x")}',
    ],
)
def test_the_check_catches_real_access(tmp_path: Path, source: str) -> None:
    """The walk must see each way of spelling an access, or the test above proves nothing."""
    f = tmp_path / "m.py"
    f.write_text(f'"""cgroup.procs in a doc string is prose."""\nimport os\n{source}\n')
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path
    try:
        assert len(_offences(f)) == 1
    finally:
        PACKAGE = saved
    f.write_text('"""Reads cgroup.procs and /proc/mounts (prose only)."""\n\ndef f():\n    """cpuset.cpus too."""\n'
                 'HELP = "cpu.idle writes on the reclaimed root cgroup"\nspec = {"mounts": []}\n')
    assert _offences(f) == []
