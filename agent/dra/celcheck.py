"""The part of cel-go's type check that DRA selectors meet, over cel-python's parse
tree: cel-python checks nothing before evaluation, so an expression Kubernetes
refuses to compile would otherwise be evaluated, and a branch short-circuited
away (``false && size > 5``) would never say so.

Types are inferred where they are known for sure: literals, the ``device``
variable (``driver`` a string, ``capacity[d][n]`` a ``kubernetes.Quantity``,
``attributes[d][n]`` dynamic), the results of the libraries' functions; any
other sub-expression is unknown and never refused for. Refused, as cel-go
refuses them:

- a function called in the wrong style: ``q.sign()`` (``sign`` is a global
  function), ``compareTo(a, b)`` (a member function);
- an ordering (``<``, ``<=``, ``>``, ``>=``) or arithmetic on a Quantity or a
  Semver (they have ``compareTo``/``isLessThan``/``add``), and ``==``/``!=``
  between a Quantity or Semver and a known other type;
- a list literal whose elements' known types differ (``[dyn, 3]``: cel-go's
  homogeneous aggregate literals);
- a call of a function no library declares (``kind.reverse()``), which
  cel-python would only find when evaluating it, and ``||`` could hide;
- a conditional ``c ? a : b`` whose branches have two known, different types;
- ``"%s".format([...])`` with a dynamic value in the literal list (cel-go checks
  a literal format string's clauses against the list's element types).
"""

from __future__ import annotations

from typing import Any

__all__ = ["static_errors"]

QUANTITY, SEMVER, DYN = "kubernetes.Quantity", "kubernetes.Semver", "dyn"
#: functions Kubernetes declares only as globals, and only as members
GLOBAL_ONLY = {"quantity", "isQuantity", "sign", "semver", "isSemver", "isIP", "isCIDR", "cidr"}
MEMBER_ONLY = {"compareTo", "isGreaterThan", "isLessThan", "asInteger", "isInteger", "asApproximateFloat",
               "add", "sub", "major", "minor", "patch", "charAt", "indexOf", "lastIndexOf", "lowerAscii",
               "upperAscii", "replace", "split", "substring", "trim", "join", "format", "isSorted", "find", "findAll",
               "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast",
               "isGlobalUnicast", "containsIP", "containsCIDR", "masked", "prefixLength"}
_METHOD_RESULT = {
    "compareTo": "int", "isGreaterThan": "bool", "isLessThan": "bool", "asInteger": "int", "isInteger": "bool",
    "asApproximateFloat": "double", "major": "int", "minor": "int", "patch": "int", "charAt": "string",
    "indexOf": "int", "lastIndexOf": "int", "lowerAscii": "string", "upperAscii": "string", "replace": "string",
    "substring": "string", "trim": "string", "join": "string", "format": "string", "split": "list",
    "size": "int", "startsWith": "bool", "endsWith": "bool", "contains": "bool", "matches": "bool",
}
_GLOBAL_RESULT = {"quantity": QUANTITY, "semver": SEMVER, "isQuantity": "bool", "isSemver": "bool", "sign": "int",
                  "size": "int", "int": "int", "uint": "uint", "double": "double", "string": "string",
                  "bool": "bool", "dyn": DYN}
#: what a call may name besides cellib's functions: cel-python's standard functions and the macros
_STANDARD = {"size", "contains", "type", "endsWith", "startsWith", "matches", "getDate", "getDayOfMonth",
             "getDayOfWeek", "getDayOfYear", "getFullYear", "getMonth", "getHours", "getMilliseconds",
             "getMinutes", "getSeconds", "bool", "bytes", "double", "duration", "int", "list", "map", "string",
             "timestamp", "uint", "dyn", "has", "all", "exists", "exists_one", "existsOne", "filter", "min"}
_NAMESPACES = {"cel": {"bind"}, "sets": {"contains", "equivalent", "intersects"},
               "optional": {"of", "none", "ofNonZeroValue"}}
_PASS = {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member",
         "primary", "paren_expr"}
_ORDER = {"relation_lt": "_<_", "relation_le": "_<=_", "relation_gt": "_>_", "relation_ge": "_>=_"}
_EQ = {"relation_eq": "_==_", "relation_ne": "_!=_"}


def _lit(token: str) -> str | None:
    t = token.strip()
    if t[:1] in "\"'" or t[:2].lower() in ('r"', "r'"):
        return "string"
    if t[:2].lower() in ('b"', "b'"):
        return "bytes"
    if t in ("true", "false"):
        return "bool"
    if t == "null":
        return "null_type"
    if t.endswith(("u", "U")):
        return "uint"
    if any(c in t for c in ".eE") and not t.lower().startswith("0x"):
        return "double"
    return "int" if t[:1].isdigit() or t[:1] == "-" else None


def _path(tree: Any) -> list[str] | None:
    """``device.capacity["d"].n`` as ``["device", "capacity", "[]", "n"]``, or None."""
    data = getattr(tree, "data", None)
    if data in _PASS and len(tree.children) == 1:
        return _path(tree.children[0])
    if data == "ident":
        return [str(tree.children[0])]
    if data == "member_dot":
        head = _path(tree.children[0])
        return None if head is None else [*head, str(tree.children[1])]
    if data == "member_index":
        head = _path(tree.children[0])
        return None if head is None else [*head, "[]"]
    return None


def _unwrap(tree: Any) -> Any:
    while getattr(tree, "data", None) in _PASS and len(tree.children) == 1:
        tree = tree.children[0]
    return tree


def _literal_kind(tree: Any) -> str | None:
    return getattr(_unwrap(tree), "data", None)


class _Checker:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def type_of(self, tree: Any) -> str | None:  # noqa: C901 - one case per node kind
        data = getattr(tree, "data", None)
        if data is None:
            return None
        kids = tree.children
        if data in _PASS and len(kids) == 1:
            return self.type_of(kids[0])
        if data == "literal":
            return _lit(str(kids[0]))
        path = _path(tree)
        if path is not None and path[:1] == ["device"]:
            if path == ["device", "driver"]:
                return "string"
            if len(path) == 4 and path[1] == "capacity":
                return QUANTITY
            if len(path) == 4 and path[1] == "attributes":
                return DYN
        if data == "relation" and len(kids) == 2:
            return self.relation(kids[0], kids[1])
        if data == "expr" and len(kids) == 3:
            return self.conditional(kids)
        if data in ("addition", "multiplication") and len(kids) == 2:
            left = self.type_of(kids[0].children[0]) if kids[0].children else None
            right = self.type_of(kids[1])
            if QUANTITY in (left, right) or SEMVER in (left, right):
                self.errors.append(f"found no matching overload for '{kids[0].data}' applied to '({left}, {right})'")
            return None
        if data == "member_dot_arg":
            return self.method(kids)
        if data == "ident_arg":
            return self.function(kids)
        if data == "list_lit":
            self.list_literal(kids)
            return "list"
        for k in kids:
            self.type_of(k)
        return None

    def relation(self, op_tree: Any, right_tree: Any) -> str:
        left = self.type_of(op_tree.children[0]) if op_tree.children else None
        right = self.type_of(right_tree)
        op = op_tree.data
        special = {QUANTITY, SEMVER}
        if op in _ORDER and (left in special or right in special):
            self.errors.append(f"found no matching overload for '{_ORDER[op]}' applied to '({left}, {right})'")
        if op in _EQ and (left in special or right in special) and None not in (left, right) \
                and DYN not in (left, right) and left != right:
            self.errors.append(f"found no matching overload for '{_EQ[op]}' applied to '({left}, {right})'")
        return "bool"

    def conditional(self, kids: Any) -> str | None:
        """``c ? a : b``: cel-go's ``_?_:_`` takes two branches of one type; two known, different
        ones (``c ? size() : 0 > 3``, an int and a bool) do not compile. ``null`` is left alone (it
        is assignable to several types)."""
        cond, yes, no = (self.type_of(k) for k in kids)
        known = {yes, no} - {None, DYN, "null_type"}
        if len(known) == 2 and yes in known and no in known:
            self.errors.append(f"found no matching overload for '_?_:_' applied to '({cond or 'bool'}, {yes}, {no})'")
        return yes if yes == no else None

    def declared(self, name: str) -> None:
        from agent.dra.cellib import FUNCTIONS

        if name not in FUNCTIONS and name not in _STANDARD:
            self.errors.append(f"undeclared reference to '{name}' (in container '')")

    def method(self, kids: Any) -> str | None:
        target, name = kids[0], str(kids[1])
        namespace = _path(target)
        if namespace is not None and len(namespace) == 1 and namespace[0] in _NAMESPACES:
            if name not in _NAMESPACES[namespace[0]]:
                self.errors.append(f"undeclared reference to '{namespace[0]}.{name}' (in container '')")
        else:
            self.declared(name)
        receiver = None if _path(target) in (["cel"], ["sets"]) else self.type_of(target)
        if len(kids) > 2:
            for arg in kids[2].children:
                self.type_of(arg)
        if name in GLOBAL_ONLY and _path(target) not in (["cel"], ["sets"]):
            self.errors.append(f"found no matching overload for '{name}' applied to '{receiver or DYN}.(...)'")
        if name in ("add", "sub") and receiver == QUANTITY:
            return QUANTITY
        if name == "format" and len(kids) > 2 and self._dyn_format_argument(target, kids[2]):
            self.errors.append("error during formatting: a clause was given dyn (google.protobuf.Any)")
        return _METHOD_RESULT.get(name)

    def _dyn_format_argument(self, target: Any, args: Any) -> bool:
        """``"%s".format([device.attributes[..].x])``: cel-go checks a literal format string's clauses
        against a literal list's element types, and a dynamic one fits none."""
        if self.type_of(target) != "string" or _literal_kind(target) != "literal" or len(args.children) != 1:
            return False
        lst = _unwrap(args.children[0])
        if getattr(lst, "data", None) != "list_lit" or not lst.children:
            return False
        return any(self.type_of(e) == DYN for e in lst.children[0].children)

    def function(self, kids: Any) -> str | None:
        name = str(kids[0])
        self.declared(name)
        if len(kids) > 1:
            for arg in kids[1].children:
                self.type_of(arg)
        if name in MEMBER_ONLY:
            self.errors.append(f"found no matching overload for '{name}' applied to a global call")
        return _GLOBAL_RESULT.get(name)

    def list_literal(self, kids: Any) -> None:
        elems = kids[0].children if kids and getattr(kids[0], "data", None) == "exprlist" else []
        types = [self.type_of(e) for e in elems]
        if len(types) > 1 and None not in types and len(set(types)) > 1:
            first = types[0]
            other = next(t for t in types if t != first)
            self.errors.append(f"expected type '{'any' if first == DYN else first}' but found "
                               f"'{'any' if other == DYN else other}'")


def static_errors(ast: Any) -> list[str]:
    """What cel-go's checker would refuse in this parse tree (empty when nothing is known wrong)."""
    c = _Checker()
    c.type_of(ast)
    return c.errors
