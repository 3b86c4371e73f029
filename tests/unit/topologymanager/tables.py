"""Reading kubelet_policy_cases.toml: the notation its header describes."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from agent.contracts.hints import TopologyHint

CASES = tomllib.loads((Path(__file__).with_name("kubelet_policy_cases.toml")).read_text())


def parse_hint(text: str) -> TopologyHint:
    body = text.strip()
    preferred = True
    if body.endswith("np"):
        preferred, body = False, body[:-2].strip()
    if body == "any":
        return TopologyHint(None, preferred)
    nodes = frozenset(int(n) for n in body.split(",")) if body else frozenset()
    return TopologyHint(nodes, preferred)


def parse_expected(text: str, nodes: list[int]) -> TopologyHint:
    body = text.strip()
    if body.split()[0] == "all":
        return TopologyHint(frozenset(nodes), not body.endswith("np"))
    return parse_hint(body)


def parse_providers(providers: list[dict[str, Any]]) -> list[dict[str, list[TopologyHint] | None]]:
    out = []
    for p in providers:
        out.append({
            resource: (None if hints == "no-preference" else [parse_hint(h) for h in hints])
            for resource, hints in p.items()
        })
    return out


def machine(name: str) -> tuple[list[int], dict[int, dict[int, int]]]:
    m = CASES["machines"][name]
    nodes = m["nodes"]
    return nodes, {a: dict(zip(nodes, row, strict=True)) for a, row in zip(nodes, m["distances"], strict=True)}


def case_id(case: dict[str, Any]) -> str:
    return case["name"]
