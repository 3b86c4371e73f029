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


#: ``agent/`` from the bottom up; a package imports only packages in its own layer or below.
#: Kept in step with docs/architecture.md ("The layers, bottom to top").
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("values and adapters", frozenset({
        "cpuset", "eventlog", "limits", "diskname", "safepath", "statefile", "journal", "iothread", "fsread", "grpcguard",
        "quantity", "unixsock", "tasks", "datafiles", "config", "daemonconfig", "rootpaths", "cgroups", "devices", "topology",
        "sharedvalues", "jsonlines", "jsonc", "humanbytes", "journalbatch",
    })),
    ("contracts", frozenset({"contracts"})),
    ("owners", frozenset({
        "pods", "podresources", "cpu", "devicemanager", "deviceplugin", "workloads", "runtime", "pressure",
        "kubelet", "topologymanager", "memory", "dra", "advisor", "nri", "slurm", "poddirectories",
    })),
    ("read side and assembly", frozenset({"status", "doctor", "daemon"})),
    ("command line", CLI),
)

#: The imports that still close a cycle of packages: up the layers. The list is exact: a new upward import or
#: a new cycle fails the tests, and so does removing one of these without
#: taking it off the list.
KNOWN_CYCLE_EDGES: frozenset[tuple[str, str]] = frozenset()


def _layer_of() -> dict[str, int]:
    return {pkg: i for i, (_, pkgs) in enumerate(LAYERS) for pkg in pkgs}


def upward_edges(edges: dict[tuple[str, str], list[str]]) -> dict[tuple[str, str], list[str]]:
    layer = _layer_of()
    return {e: where for e, where in edges.items() if layer[e[0]] < layer[e[1]]}


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one package (Tarjan)."""
    succ: dict[str, list[str]] = defaultdict(list)
    for a, b in sorted(edges):
        succ[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted({p for e in edges for p in e}):
        if v not in index:
            visit(v)
    return sorted(out)


def test_every_package_has_a_layer():
    packages = {p for e in import_graph() for p in e} | {p.stem if p.is_file() else p.name for p in AGENT.iterdir()
                                                        if (p.suffix == ".py" or (p / "__init__.py").exists())}
    packages -= {"__init__", "api", "agent"}
    layer = _layer_of()
    assert sorted(packages - set(layer)) == [], "place each new package in LAYERS (and docs/architecture.md)"
    assert sum(len(p) for _, p in LAYERS) == len(layer), "a package is in two layers"


def test_imports_point_down_but_for_the_known_cycle_edges():
    edges = import_graph()
    new = {f"{a} -> {b}": where for (a, b), where in upward_edges(edges).items() if (a, b) not in KNOWN_CYCLE_EDGES}
    assert new == {}, "an import against the layers (move the code down, or the import up)"
    gone = sorted(KNOWN_CYCLE_EDGES - set(edges))
    assert gone == [], "no longer imported: take it off KNOWN_CYCLE_EDGES (and docs/architecture.md)"


def test_no_package_cycle_but_through_the_known_edges():
    edges = set(import_graph())
    assert cycles(edges - KNOWN_CYCLE_EDGES) == []
    # each known edge is on a cycle: without it the list would be naming a plain layering slip
    assert {e for e in KNOWN_CYCLE_EDGES if not any(set(e) <= set(c) for c in cycles(edges))} == set()


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [["a", "b", "c"]]
    assert cycles({("a", "b"), ("b", "c")}) == []
