"""CEL device selectors, evaluated with cel-python (``celpy``) in the environment
Kubernetes evaluates them in (``k8s.io/dynamic-resource-allocation/cel``).

The expression sees ``device`` with ``driver``, ``attributes[domain][name]``
(int, bool, string, or a ``Semver`` for a version) and
``capacity[domain][name]`` (a ``Quantity``); a domain the device has nothing in
is an empty map, so ``has(device.attributes["other.io"].x)`` is false, not an
error. On top of cel-python's standard functions: the Kubernetes quantity and
semver libraries, ``cel.bind``, the extended strings, the lists, regex, ip and
cidr libraries, ``sets.*`` and the two-variable comprehensions
(``agent.dra.cellib``), cel-go's equality and ordering across types
(``agent.dra.celvalues``), and a runtime cost limit.

cel-python checks no types before evaluation; ``agent.dra.celcheck`` refuses
at compile time what cel-go's checker refuses for the types DRA selectors meet
(``capacity...size > 5``: a Quantity against an int), so such an expression is
refused even in a branch that is never evaluated.

Expressions are compiled once per text (a bounded cache). An expression that
does not compile is a ``CELError`` when its file is read; one that fails on a
device or gives no bool raises ``CELError`` from ``matches`` (what the
allocator does with that is the allocator's business: see its docstring).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from agent.dra.celvalues import OPT_PREFIX, OptionalValue, rewrite_optional_select
from agent.dra.claims import ClaimError

__all__ = ["CELError", "CostExceeded", "COST_LIMIT", "check", "matches", "device_activation"]

#: resource.k8s.io's CELSelectorExpressionMaxCost: the runtime cost one evaluation may spend
COST_LIMIT = 1_000_000


class CELError(ClaimError):
    """A selector that does not compile, or fails or gives no bool on a device."""


class CostExceeded(Exception):
    """An evaluation spent more than its cost limit (cel-go: "actual cost limit exceeded")."""


@functools.cache
def _runtime() -> tuple[Any, Any, Any]:
    """(environment, evaluator class, domain map class), built on first use: the daemon starts without celpy."""
    import celpy
    from celpy import celtypes
    from celpy.evaluation import Evaluator

    class KubeEvaluator(Evaluator):
        """cel-python's evaluator plus ``cel.bind``, ``sets.*`` and a cost meter.

        The cost is counted in visited syntax nodes (each an operation, as cel-go
        counts one per call, comparison and access), shared by every nested
        evaluator of one evaluation (macros, ``cel.bind``)."""

        def __init__(self, ast: Any, activation: Any, meter: list[int] | None = None) -> None:
            super().__init__(ast, activation)
            self.meter = meter if meter is not None else [COST_LIMIT]

        def sub_evaluator(self, ast: Any) -> Any:
            return KubeEvaluator(ast, self.activation, self.meter)

        def _visit_tree(self, tree: Any) -> Any:
            self.meter[0] -= 1
            if self.meter[0] < 0:
                raise CostExceeded("operation cancelled: actual cost limit exceeded")
            return super()._visit_tree(tree)

        def member_dot(self, tree: Any) -> Any:
            name = str(tree.children[1])
            if name.startswith(OPT_PREFIX):
                return _optional_select(self, tree, name[len(OPT_PREFIX):])
            return super().member_dot(tree)

        def member_dot_arg(self, tree: Any) -> Any:
            namespace = _plain_ident(tree.children[0])
            if namespace == "optional" and len(tree.children) >= 2:
                return _optional_namespace(self, tree)
            if namespace == "cel" and tree.children[1].value == "bind":
                return _bind(self, tree)
            if namespace == "sets" and len(tree.children) == 3:
                return _namespaced(self, namespace, tree)
            method = tree.children[1].value
            if method in ("all", "exists", "existsOne", "exists_one") and len(tree.children) == 3 \
                    and len(tree.children[2].children) == 3:
                return _two_var(self, tree, method)
            return super().member_dot_arg(tree)

    class DomainMap(celtypes.MapType):
        """A map of domains: a domain the device has nothing in is an empty map, as upstream's."""

        def __getitem__(self, key: Any) -> Any:
            try:
                return super().__getitem__(key)
            except KeyError:
                return celtypes.MapType({})

    return celpy.Environment(), KubeEvaluator, DomainMap


def _bind(ev: Any, tree: Any) -> Any:
    """``cel.bind(name, init, body)``: ``body`` with ``name`` bound to ``init``, evaluated once."""
    from celpy.evaluation import CELEvalError

    args = tree.children[2].children if len(tree.children) == 3 else []
    name = _plain_ident(args[0]) if len(args) == 3 else None
    if name is None:
        return CELEvalError("cel.bind() takes an identifier, an initializer and an expression", TypeError, None,
                            tree=tree)
    value = ev.visit(args[1])
    if isinstance(value, CELEvalError):
        return value
    nested = type(ev)(args[2], ev.activation, ev.meter)
    nested.activation = ev.activation.nested_activation(vars={name: value})
    return nested.visit(args[2])


def _optional_select(ev: Any, tree: Any, key: str) -> Any:
    """``m.?key``: ``optional.of(m.key)`` when the map has the key, else ``optional.none()``; on an
    optional it selects through a present value and stays none on an absent one."""
    from celpy import celtypes
    from celpy.evaluation import CELEvalError

    target = ev.visit(tree.children[0])
    if isinstance(target, CELEvalError):
        return target
    if isinstance(target, OptionalValue):
        if not target.present:
            return target
        target = target.value
    if not isinstance(target, celtypes.MapType):
        return CELEvalError(f"no such overload: {type(target).__name__}.?{key}", TypeError, None, tree=tree)
    try:
        return OptionalValue(target[celtypes.StringType(key)], True)
    except KeyError:
        return OptionalValue()


def _optional_namespace(ev: Any, tree: Any) -> Any:
    """``optional.of(x)``, ``optional.ofNonZeroValue(x)``, ``optional.none()``."""
    from celpy.evaluation import CELEvalError

    name = str(tree.children[1])
    args = ev.visit_children(tree.children[2]) if len(tree.children) == 3 else []
    for a in args:
        if isinstance(a, CELEvalError):
            return a
    if name == "none" and not args:
        return OptionalValue()
    if name == "of" and len(args) == 1:
        return OptionalValue(args[0], True)
    if name == "ofNonZeroValue" and len(args) == 1:
        return OptionalValue(args[0], True) if args[0] else OptionalValue()
    return CELEvalError(f"undeclared reference to 'optional.{name}'", TypeError, None, tree=tree)


def _two_var(ev: Any, tree: Any, method: str) -> Any:
    """``m.all(k, v, p)``, ``exists``, ``existsOne``: cel-go's two-variable comprehensions, over a
    map's keys and values or a list's indexes and elements."""
    from celpy import celtypes
    from celpy.evaluation import CELEvalError

    target = ev.visit(tree.children[0])
    if isinstance(target, CELEvalError):
        return target
    first, second, body = tree.children[2].children
    names = (_plain_ident(first), _plain_ident(second))
    if None in names:
        return CELEvalError(f"{method}() takes two identifiers and an expression", TypeError, None, tree=tree)
    if isinstance(target, celtypes.MapType):
        pairs = list(target.items())
    elif isinstance(target, celtypes.ListType):
        pairs = [(celtypes.IntType(i), x) for i, x in enumerate(target)]
    else:
        return CELEvalError(f"no such overload: {type(target).__name__}.{method}()", TypeError, None, tree=tree)
    hits, error = 0, None
    for key, value in pairs:
        nested = type(ev)(body, ev.activation, ev.meter)
        nested.activation = ev.activation.nested_activation(vars={names[0]: key, names[1]: value})
        got = nested.visit(body)
        if isinstance(got, CELEvalError) or not isinstance(got, celtypes.BoolType):
            error = got if isinstance(got, CELEvalError) else CELEvalError("no such overload", TypeError, None)
            continue
        if method == "all" and not got:
            return celtypes.BoolType(False)
        if method == "exists" and got:
            return celtypes.BoolType(True)
        hits += bool(got)
    if error is not None:
        return error
    return celtypes.BoolType(method == "all" or (method != "exists" and hits == 1))


def _namespaced(ev: Any, namespace: str, tree: Any) -> Any:
    """``sets.contains(a, b)`` and friends: a function of a namespace, not a method of a variable."""
    from celpy.evaluation import CELEvalError

    from agent.dra.cellib import call_namespaced

    args = ev.visit_children(tree.children[2])
    for a in args:
        if isinstance(a, Exception):
            return a
    try:
        return call_namespaced(namespace, tree.children[1].value, args)
    except TypeError as e:
        return CELEvalError(str(e), TypeError, e.args, tree=tree)


def _plain_ident(tree: Any) -> str | None:
    """The name when ``tree`` is nothing but an identifier (``cel`` in ``cel.bind``), else None."""
    while hasattr(tree, "data") and len(getattr(tree, "children", ())) == 1 and tree.data != "ident":
        tree = tree.children[0]
    if getattr(tree, "data", None) == "ident":
        return str(tree.children[0].value)
    return None


@functools.lru_cache(maxsize=512)
def _program(expression: str) -> Any:
    from agent.dra.cellib import FUNCTIONS, OPERATORS

    from agent.dra.celcheck import static_errors
    from agent.dra.celcost import estimated_cost

    env, _, _ = _runtime()
    try:
        ast = env.compile(rewrite_optional_select(expression))
    except Exception as e:  # noqa: BLE001 - celpy's parse errors share no base class worth naming
        raise CELError(f"CEL expression {expression[:200]!r} does not compile: {_brief(e)}") from None
    errors = static_errors(ast)
    if errors:
        raise CELError(f"CEL expression {expression[:200]!r} does not compile: {errors[0]}")
    cost = estimated_cost(ast)
    if cost > COST_LIMIT:
        raise CELError(f"CEL expression {expression[:200]!r} does not compile: estimated cost limit exceeded: "
                       f"{cost} > {COST_LIMIT} with every comprehension run to its end (Kubernetes' API "
                       "server refuses such a selector; its allocator stops it at the same limit)")
    return env.program(ast, functions={**OPERATORS, **FUNCTIONS})


_OPS = {"relation_eq": "_==_", "relation_ne": "_!=_", "relation_lt": "_<_", "relation_le": "_<=_",
        "relation_gt": "_>_", "relation_ge": "_>=_", "relation_in": "@in"}
_CEL_NAMES = {"IntType": "int", "UintType": "uint", "DoubleType": "double", "BoolType": "bool", "StringType": "string",
              "BytesType": "bytes", "ListType": "list", "MapType": "map", "Quantity": "kubernetes.Quantity",
              "Semver": "kubernetes.Semver", "NoneType": "null_type"}


def _brief(e: BaseException) -> str:
    """An error's first line in cel-go's words, without cel-python's dump of the whole activation."""
    import re

    text = (str(e.args[0]) if e.args else str(e)).split(" (in activation ")[0].splitlines()[0]
    m = re.match(r"found no matching overload for Token\('RULE', '(\w+)'\) applied to '\(<class '[\w.]*?(\w+)'>, "
                 r"<class '[\w.]*?(\w+)'>\)'", text)
    if m:
        op, a, b = m.groups()
        text = (f"no such overload: {_OPS.get(op, op)} applied to "
                f"({_CEL_NAMES.get(a, a)}, {_CEL_NAMES.get(b, b)})")
    return text[:300]


def check(expression: str) -> None:
    """Compile ``expression`` (``CELError`` when it does not), so a file is refused when read."""
    _program(expression)


def device_activation(driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, int]) -> dict[str, Any]:
    """The ``device`` variable for qualified attribute and capacity names (``domain/name``):
    attributes as CEL values (a ``catalog.Version`` as a ``Semver``), capacities as ``Quantity``."""
    from fractions import Fraction

    from celpy import celtypes

    from agent.dra.catalog import Version
    from agent.dra.celvalues import Quantity, parse_semver

    domain_map = _runtime()[2]

    def value(v: Any) -> Any:
        if isinstance(v, Version):
            return parse_semver(v.text)
        if isinstance(v, bool):
            return celtypes.BoolType(v)
        if isinstance(v, int):
            return celtypes.IntType(v)
        return celtypes.StringType(str(v))

    def nest(flat: Mapping[str, Any], conv: Any) -> Any:
        out: dict[Any, Any] = {}
        for q, v in flat.items():
            domain, _, ident = q.rpartition("/")
            out.setdefault(celtypes.StringType(domain or driver), {})[celtypes.StringType(ident)] = conv(v)
        return domain_map({k: celtypes.MapType(v) for k, v in out.items()})

    return {"device": celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(driver),
        celtypes.StringType("attributes"): nest(attributes, value),
        celtypes.StringType("capacity"): nest(capacity, lambda v: Quantity(Fraction(v))),
        celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(False),
    })}


def matches(expression: str, activation: Mapping[str, Any], device: str = "", cost_limit: int = COST_LIMIT) -> bool:
    """Whether the device (``device_activation``) satisfies ``expression``; ``CELError`` when
    the expression fails on it, gives no bool, or spends more than ``cost_limit``."""
    prg = _program(expression)
    evaluator = _runtime()[1]
    try:
        out = evaluator(prg.ast, prg.new_activation(), [cost_limit]).evaluate(dict(activation))
    except CostExceeded as e:
        raise CELError(f"CEL expression {expression[:200]!r} on device {device}: {e} ({cost_limit})") from None
    except Exception as e:  # noqa: BLE001 - celpy raises its own error types and Python's
        raise CELError(f"CEL expression {expression[:200]!r} failed on device {device}: {_brief(e)}") from None
    if isinstance(out, Exception):  # celpy may return its error value instead of raising
        raise CELError(f"CEL expression {expression[:200]!r} failed on device {device}: {_brief(out)}")
    from celpy import celtypes

    if not isinstance(out, celtypes.BoolType):  # celpy's BoolType subclasses int, not bool
        raise CELError(f"CEL expression {expression[:200]!r} gave {type(out).__name__} on device {device}, "
                       "not a bool")
    return bool(out)
