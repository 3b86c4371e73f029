"""The layers of ``agent/`` point one way: the package-level import graph, checked.

A package here is a folder directly under ``agent/`` (``agent.cpu``) or a module
there (``agent.contracts``, ``agent.cli``). Every import counts, the ones under
``TYPE_CHECKING`` and inside functions included: a function-local import is a
dependency taken later, not one avoided, and a type-only one still ties the two
packages' changes together. ``agent.api`` (generated code) is left out.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
AGENT = REPO / "agent"

#: the command line: the only packages that may import agent.commands or agent.cli
CLI = frozenset({"cli", "commands", "__main__"})


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "agent":
        return None
    return parts[1] if len(parts) > 1 else "agent"


def _targets(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if not node.level:
            return [node.module or ""]
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        return [".".join(base + ([node.module] if node.module else []))]
    return []


def import_graph(root: Path = AGENT) -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) -> the files (with line) that make the edge."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        src = _package(module)
        if src is None or src == "api":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _targets(node, module, path.name == "__init__.py"):
                dst = _package(target)
                if dst is not None and dst not in (src, "api", "agent"):
                    edges[(src, dst)].append(f"{path.relative_to(root.parent)}:{getattr(node, 'lineno', 0)}")
    return dict(edges)


def commands_imported_from_below(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    return sorted(f"{src} -> {dst} ({', '.join(where)})" for (src, dst), where in edges.items()
                  if dst in CLI and src not in CLI)


def test_nothing_below_the_command_line_imports_it():
    """agent.commands and agent.cli are the top: a reader a command and the daemon
    share lives below both (agent/status), never in a command module."""
    assert commands_imported_from_below(import_graph()) == []


def test_the_graph_reader_sees_type_checking_local_and_relative_imports(tmp_path):
    fake = tmp_path / "agent"
    (fake / "topology").mkdir(parents=True)
    (fake / "topology" / "__init__.py").write_text("from .model import X\n")
    (fake / "topology" / "model.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from agent.cli import CommandError\n"
        "def f():\n    from agent.commands import resources\n"
        "from ..cpuset import CPUSet\n")
    edges = import_graph(fake)
    assert commands_imported_from_below(edges) == [
        "topology -> cli (agent/topology/model.py:3)",
        "topology -> commands (agent/topology/model.py:5)",
    ]
    assert edges[("topology", "cpuset")] == ["agent/topology/model.py:6"]
