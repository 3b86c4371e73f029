"""A CEL selector's estimated cost before it is evaluated, as cel-go's static estimate
bounds it: every comprehension runs over its whole range, so nested comprehensions
over literal lists multiply (``[60 items].all(a, [60 items].all(b, [60 items].all(c,
...)))`` is 216,000 evaluations of the body).

The Kubernetes API server refuses a selector whose estimated cost exceeds
``CELSelectorExpressionMaxCost``; hwagent has no API server in standalone mode,
and cel-python spends about as long per operation as cel-go spends per hundred,
so without this estimate such an expression would run for many seconds per device
before its runtime cost limit stopped it.

Units: one per operation (a literal, an identifier, a call, an operator, a member
or index access), not per parse-tree node: cel-python's grammar wraps every operand
in a chain of single-child nodes that cel-go does not have. A comprehension costs
its range, then per element its body plus one; a range whose size is not known
before evaluation (a list computed from a device's attributes) counts once.
"""

from __future__ import annotations

from typing import Any

__all__ = ["estimated_cost"]

#: cel-python's single-child wrappers, free
_PASS = {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member",
         "primary", "paren_expr", "exprlist"}
_MACROS = {"all", "exists", "exists_one", "existsOne", "map", "filter"}


def _unwrap(tree: Any) -> Any:
    while getattr(tree, "data", None) in _PASS and len(tree.children) == 1:
        tree = tree.children[0]
    return tree


def _size(tree: Any) -> int:
    """A comprehension range's element count when it is a literal list or map, else 1."""
    node = _unwrap(tree)
    data = getattr(node, "data", None)
    if data in ("list_lit", "map_lit"):
        if not node.children:
            return 0
        items = node.children[0]
        n = len(getattr(items, "children", ()))
        return n // 2 if data == "map_lit" and getattr(items, "data", "") == "mapinits" else n
    return 1


def estimated_cost(tree: Any) -> int:
    """The cost of evaluating ``tree`` with every comprehension run to its end."""
    data = getattr(tree, "data", None)
    if data is None:
        return 0
    kids = tree.children
    if data == "member_dot_arg" and len(kids) == 3 and str(kids[1]) in _MACROS \
            and len(getattr(kids[2], "children", ())) >= 2:
        body = sum(estimated_cost(a) for a in kids[2].children[1:])
        return 1 + estimated_cost(kids[0]) + _size(kids[0]) * (body + 1)
    own = 0 if data in _PASS and len(kids) == 1 else 1
    return own + sum(estimated_cost(k) for k in kids)
