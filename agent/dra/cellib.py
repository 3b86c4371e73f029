"""The functions of the Kubernetes CEL environment that DRA selectors see, for
cel-python: the quantity and semver libraries, the extended strings (cel-go
``ext.Strings`` version 2), Kubernetes' lists and regex libraries, and the
cel-go ``sets`` extension. cel-python calls a method ``x.f(a)`` as the function
``f(x, a)``, so one name serves every receiver type and dispatches on it.

A wrong argument type raises ``NoOverload`` (cel-python turns a ``TypeError``
into "no such overload"); a bad value (``quantity("ten")``, an index out of
range) gives a CEL error value, which ``&&``/``||`` may absorb as in cel-go.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from agent.dra.celvalues import (
    CIDR,
    IP,
    NoOverload,
    OptionalValue,
    Quantity,
    Semver,
    cel_cmp,
    cel_eq,
    cel_in,
    parse_cidr,
    parse_ip,
    parse_quantity,
    parse_semver,
)

__all__ = ["FUNCTIONS", "OPERATORS", "call_namespaced"]

_INT64 = (-(1 << 63), (1 << 63) - 1)


def _err(message: str) -> CELEvalError:
    return CELEvalError(message, ValueError, (message,))


def _want(value: Any, *types: type, what: str = "") -> None:
    if not isinstance(value, types) or (celtypes.BoolType not in types and isinstance(value, celtypes.BoolType)
                                        and celtypes.IntType in types):
        raise NoOverload(f"no such overload: {what or 'function'} applied to {type(value).__name__}")


def _int(value: Any) -> int:
    _want(value, celtypes.IntType, what="int argument")
    return int(value)


# -- quantity ----------------------------------------------------------------------------------

def quantity(text: Any) -> Any:
    _want(text, celtypes.StringType, what="quantity")
    try:
        return parse_quantity(str(text))
    except ValueError as e:
        return _err(f"quantity({str(text)[:64]!r}): {e}")


def is_quantity(text: Any) -> celtypes.BoolType:
    _want(text, celtypes.StringType, what="isQuantity")
    try:
        parse_quantity(str(text))
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _operand(q: Any, other: Any, name: str) -> Fraction:
    _want(q, Quantity, what=name)
    if isinstance(other, Quantity):
        return other.value
    _want(other, celtypes.IntType, what=name)
    return Fraction(int(other))


def add(q: Any, other: Any) -> Quantity:
    v = _operand(q, other, "add")
    return Quantity(q.value + v)


def sub(q: Any, other: Any) -> Quantity:
    v = _operand(q, other, "sub")
    return Quantity(q.value - v)


def _fits_int64(v: Fraction) -> bool:
    return v.denominator == 1 and _INT64[0] <= v.numerator <= _INT64[1]


def as_integer(q: Any) -> Any:
    _want(q, Quantity, what="asInteger")
    if not _fits_int64(q.value):
        return _err("cannot convert value to integer")
    return celtypes.IntType(q.value.numerator)


def is_integer(q: Any) -> celtypes.BoolType:
    _want(q, Quantity, what="isInteger")
    return celtypes.BoolType(_fits_int64(q.value))


def as_approximate_float(q: Any) -> celtypes.DoubleType:
    _want(q, Quantity, what="asApproximateFloat")
    return celtypes.DoubleType(float(q.value))


def sign(q: Any) -> celtypes.IntType:
    _want(q, Quantity, what="sign")
    return celtypes.IntType((q.value > 0) - (q.value < 0))


# -- semver ------------------------------------------------------------------------------------

def semver(text: Any, normalize: Any = None) -> Any:
    _want(text, celtypes.StringType, what="semver")
    try:
        return parse_semver(str(text), bool(normalize))
    except ValueError as e:
        return _err(f"semver({str(text)[:64]!r}): {e}")


def is_semver(text: Any, normalize: Any = None) -> celtypes.BoolType:
    _want(text, celtypes.StringType, what="isSemver")
    try:
        parse_semver(str(text), bool(normalize))
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _part(name: str) -> Callable[[Any], celtypes.IntType]:
    def get(v: Any) -> celtypes.IntType:
        _want(v, Semver, what=name)
        return celtypes.IntType(getattr(v, name))
    return get


# -- compareTo, isGreaterThan, isLessThan: Quantity and Semver ------------------------------------

def _compare(a: Any, b: Any, name: str) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    raise NoOverload(f"no such overload: {type(a).__name__}.{name}({type(b).__name__})")


def compare_to(a: Any, b: Any) -> celtypes.IntType:
    return celtypes.IntType(_compare(a, b, "compareTo"))


def is_greater_than(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare(a, b, "isGreaterThan") > 0)


def is_less_than(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare(a, b, "isLessThan") < 0)


# -- strings (cel-go ext.Strings v2), indexed by code point --------------------------------------

def _str(s: Any, name: str) -> str:
    _want(s, celtypes.StringType, what=name)
    return str(s)


def char_at(s: Any, i: Any) -> Any:
    text, idx = _str(s, "charAt"), _int(i)
    if idx < 0 or idx > len(text):
        return _err(f"index out of range: {idx}")
    return celtypes.StringType(text[idx:idx + 1])


def index_of(s: Any, sub: Any, offset: Any = None) -> Any:
    if isinstance(s, celtypes.ListType):
        return _list_index(s, sub, last=False)
    text, needle = _str(s, "indexOf"), _str(sub, "indexOf")
    start = 0 if offset is None else _int(offset)
    if start < 0 or start > len(text):
        return _err(f"index out of range: {start}")
    return celtypes.IntType(text.find(needle, start))


def last_index_of(s: Any, sub: Any, offset: Any = None) -> Any:
    if isinstance(s, celtypes.ListType):
        return _list_index(s, sub, last=True)
    text, needle = _str(s, "lastIndexOf"), _str(sub, "lastIndexOf")
    end = len(text) if offset is None else _int(offset)
    if end < 0 or end > len(text):
        return _err(f"index out of range: {end}")
    return celtypes.IntType(text.rfind(needle, 0, end + len(needle)))


def _ascii(s: Any, name: str, upper: bool) -> celtypes.StringType:
    text = _str(s, name)
    table = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ") if upper else \
        str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
    return celtypes.StringType(text.translate(table))


def replace(s: Any, old: Any, new: Any, n: Any = None) -> celtypes.StringType:
    text, a, b = _str(s, "replace"), _str(old, "replace"), _str(new, "replace")
    count = -1 if n is None else _int(n)
    return celtypes.StringType(text.replace(a, b, count if count >= 0 else -1))


def split(s: Any, sep: Any, n: Any = None) -> celtypes.ListType:
    text, by = _str(s, "split"), _str(sep, "split")
    limit = -1 if n is None else _int(n)
    if limit == 0:
        return celtypes.ListType([])
    if by == "":
        parts = list(text) if limit < 0 or limit >= len(text) else list(text[:limit - 1]) + [text[limit - 1:]]
    else:
        parts = text.split(by, limit - 1 if limit > 0 else -1)
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def substring(s: Any, start: Any, end: Any = None) -> Any:
    text = _str(s, "substring")
    a = _int(start)
    b = len(text) if end is None else _int(end)
    if a < 0 or a > len(text) or b < 0 or b > len(text) or a > b:
        return _err(f"substring({a}, {b}): index out of range for a string of {len(text)}")
    return celtypes.StringType(text[a:b])


def trim(s: Any) -> celtypes.StringType:
    return celtypes.StringType(_str(s, "trim").strip())


def join(items: Any, sep: Any = None) -> celtypes.StringType:
    _want(items, celtypes.ListType, what="join")
    glue = "" if sep is None else _str(sep, "join")
    for x in items:
        _want(x, celtypes.StringType, what="join")
    return celtypes.StringType(glue.join(str(x) for x in items))


_VERB = re.compile(r"%(?:\.(\d+))?([sdfeExXobq%])")


def format_(s: Any, args: Any) -> Any:
    """``"%s has %d".format([a, b])``: %s %d %f %e %x %X %o %b and %%, precision for %f/%e."""
    text = _str(s, "format")
    _want(args, celtypes.ListType, what="format")
    values = list(args)
    out: list[str] = []
    pos = 0
    for m in _VERB.finditer(text):
        out.append(text[pos:m.start()])
        pos = m.end()
        prec, verb = m.group(1), m.group(2)
        if verb == "%":
            out.append("%")
            continue
        if not values:
            return _err(f"format: too few arguments for {text[:64]!r}")
        v = values.pop(0)
        try:
            out.append(_format_one(v, verb, int(prec) if prec is not None else None))
        except (TypeError, ValueError) as e:
            return _err(f"format: {e}")
    out.append(text[pos:])
    return celtypes.StringType("".join(out))


def _format_one(v: Any, verb: str, prec: int | None) -> str:
    if verb == "s":
        if isinstance(v, celtypes.BoolType):
            return "true" if v else "false"
        return str(v)
    if verb == "d" and isinstance(v, celtypes.IntType) and not isinstance(v, celtypes.BoolType):
        return str(int(v))
    if verb in "fe" + "E" and isinstance(v, (celtypes.DoubleType, celtypes.IntType)):
        return f"{float(v):.{6 if prec is None else prec}{verb}}"
    if verb in "xXob" and isinstance(v, celtypes.IntType) and not isinstance(v, celtypes.BoolType):
        return format(int(v), verb)
    if verb in "xX" and isinstance(v, celtypes.StringType):
        return str(v).encode().hex() if verb == "x" else str(v).encode().hex().upper()
    raise TypeError(f"%{verb} does not take a {type(v).__name__}")


# -- Kubernetes lists and regex libraries ---------------------------------------------------------

def _list_index(items: Any, value: Any, last: bool) -> celtypes.IntType:
    seq = list(items)
    order = range(len(seq) - 1, -1, -1) if last else range(len(seq))
    for i in order:
        if cel_eq(seq[i], value):
            return celtypes.IntType(i)
    return celtypes.IntType(-1)


def is_sorted(items: Any) -> celtypes.BoolType:
    _want(items, celtypes.ListType, what="isSorted")
    seq = list(items)
    return celtypes.BoolType(all(cel_cmp(a, b) <= 0 for a, b in zip(seq, seq[1:], strict=False)))


def sum_(items: Any) -> Any:
    _want(items, celtypes.ListType, what="sum")
    total: Any = celtypes.IntType(0)
    for i, x in enumerate(items):
        total = x if i == 0 else total + x
    return total


def max_(items: Any) -> Any:
    _want(items, celtypes.ListType, what="max")
    seq = list(items)
    if not seq:
        return _err("max of an empty list")
    best = seq[0]
    for x in seq[1:]:
        if cel_cmp(x, best) > 0:
            best = x
    return best


def find(s: Any, pattern: Any) -> Any:
    try:
        m = re.search(_str(pattern, "find"), _str(s, "find"))
    except re.error as e:
        return _err(f"invalid regular expression: {e}")
    return celtypes.StringType(m.group(0) if m else "")


def find_all(s: Any, pattern: Any, n: Any = None) -> Any:
    try:
        found = [m.group(0) for m in re.finditer(_str(pattern, "findAll"), _str(s, "findAll"))]
    except re.error as e:
        return _err(f"invalid regular expression: {e}")
    limit = -1 if n is None else _int(n)
    return celtypes.ListType([celtypes.StringType(x) for x in (found if limit < 0 else found[:limit])])


# -- ip and cidr ------------------------------------------------------------------------------------

def _parser(kind: str, parse: Callable[[str], Any]) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    def make(text: Any) -> Any:
        if isinstance(text, CIDR) and kind == "ip":  # cidr.ip(): the address of a prefix
            return IP(text.interface.ip)
        _want(text, celtypes.StringType, what=kind)
        try:
            return parse(str(text))
        except ValueError as e:
            return _err(f"{kind}({str(text)[:64]!r}): {e}")

    def test(text: Any) -> celtypes.BoolType:
        _want(text, celtypes.StringType, what=f"is{kind.upper()}")
        try:
            parse(str(text))
        except ValueError:
            return celtypes.BoolType(False)
        return celtypes.BoolType(True)
    return make, test


ip_, is_ip = _parser("ip", parse_ip)
cidr_, is_cidr = _parser("cidr", parse_cidr)


def _ip_test(attr: str) -> Callable[[Any], celtypes.BoolType]:
    def test(v: Any) -> celtypes.BoolType:
        _want(v, IP, what=attr)
        a = v.address
        if attr == "isGlobalUnicast":
            return celtypes.BoolType(not (a.is_unspecified or a.is_loopback or a.is_multicast or a.is_link_local
                                          or (a.version == 4 and str(a) == "255.255.255.255")))
        if attr == "isLinkLocalMulticast":
            ok = a.is_multicast and (str(a).startswith("224.0.0.") if a.version == 4 else
                                     (int(a) >> 112) & 0xFF0F == 0xFF02)
            return celtypes.BoolType(ok)
        return celtypes.BoolType(getattr(a, {"isUnspecified": "is_unspecified", "isLoopback": "is_loopback",
                                             "isLinkLocalUnicast": "is_link_local"}[attr]))
    return test


def family(v: Any) -> celtypes.IntType:
    _want(v, IP, what="family")
    return celtypes.IntType(v.address.version)


def contains_ip(c: Any, other: Any) -> celtypes.BoolType:
    _want(c, CIDR, what="containsIP")
    addr = parse_ip(str(other)).address if isinstance(other, celtypes.StringType) else other.address
    return celtypes.BoolType(addr in c.interface.network)


def contains_cidr(c: Any, other: Any) -> celtypes.BoolType:
    _want(c, CIDR, what="containsCIDR")
    net = parse_cidr(str(other)).interface.network if isinstance(other, celtypes.StringType) else \
        other.interface.network
    return celtypes.BoolType(net.version == c.interface.network.version and net.subnet_of(c.interface.network))


def masked(c: Any) -> CIDR:
    import ipaddress

    _want(c, CIDR, what="masked")
    return CIDR(ipaddress.ip_interface(str(c.interface.network)))


def prefix_length(c: Any) -> celtypes.IntType:
    _want(c, CIDR, what="prefixLength")
    return celtypes.IntType(c.interface.network.prefixlen)


class StringConversion(celtypes.StringType):
    """``string(x)``: cel-python's conversion, plus ip and cidr values. A class, not a function,
    because the identifier ``string`` is also the type value (``type(x) == string``), as cel-python's
    own ``int`` and ``double`` are; its results are plain ``StringType`` values."""

    def __new__(cls, v: Any, *rest: Any) -> Any:
        return celtypes.StringType(str(v) if isinstance(v, (IP, CIDR)) else v, *rest)


to_string = StringConversion


# -- optional values ------------------------------------------------------------------------------

def _opt(v: Any, name: str) -> OptionalValue:
    _want(v, OptionalValue, what=name)
    return v


def or_value(v: Any, default: Any) -> Any:
    o = _opt(v, "orValue")
    return o.value if o.present else default


def has_value(v: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_opt(v, "hasValue").present)


def value(v: Any) -> Any:
    o = _opt(v, "value")
    return o.value if o.present else _err("optional.none() dereference")


def or_(v: Any, other: Any) -> Any:
    o = _opt(v, "or")
    return o if o.present else _opt(other, "or")


# -- sets.* (cel-go ext.Sets) -------------------------------------------------------------------

def _sets(name: str, a: Any, b: Any) -> celtypes.BoolType:
    _want(a, celtypes.ListType, what=f"sets.{name}")
    _want(b, celtypes.ListType, what=f"sets.{name}")
    if name == "contains":
        return celtypes.BoolType(all(cel_in(x, a) for x in b))
    if name == "equivalent":
        return celtypes.BoolType(all(cel_in(x, a) for x in b) and all(cel_in(x, b) for x in a))
    if name == "intersects":
        return celtypes.BoolType(any(cel_in(x, a) for x in b))
    raise NoOverload(f"undeclared reference to 'sets.{name}'")


def call_namespaced(namespace: str, name: str, args: list[Any]) -> Any:
    """``sets.contains(a, b)`` and friends, which cel-python would read as a method of a variable."""
    if namespace == "sets" and len(args) == 2:
        return _sets(name, *args)
    raise NoOverload(f"undeclared reference to '{namespace}.{name}'")


# -- operators ------------------------------------------------------------------------------------

def _eq(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(cel_eq(a, b))


def _ne(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(not cel_eq(a, b))


def _order(test: Callable[[int], bool]) -> Callable[[Any, Any], celtypes.BoolType]:
    def op(a: Any, b: Any) -> celtypes.BoolType:
        return celtypes.BoolType(test(cel_cmp(a, b)))
    return op


def _in(item: Any, container: Any) -> celtypes.BoolType:
    return celtypes.BoolType(cel_in(item, container))


def _strict(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """An operand that is already an error is the result (cel-python hands operators error values)."""
    def checked(a: Any, b: Any) -> Any:
        if isinstance(a, Exception):
            return a
        if isinstance(b, Exception):
            return b
        return op(a, b)
    return checked


#: cel-python's operators replaced by cel-go's semantics
OPERATORS: dict[str, Callable[..., Any]] = {
    "_==_": _strict(_eq), "_!=_": _strict(_ne), "_in_": _strict(_in),
    "_<_": _strict(_order(lambda c: c < 0)), "_<=_": _strict(_order(lambda c: c <= 0)),
    "_>_": _strict(_order(lambda c: c > 0)), "_>=_": _strict(_order(lambda c: c >= 0)),
}

FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": quantity, "isQuantity": is_quantity, "add": add, "sub": sub, "asInteger": as_integer,
    "isInteger": is_integer, "asApproximateFloat": as_approximate_float, "sign": sign,
    "semver": semver, "isSemver": is_semver, "major": _part("major"), "minor": _part("minor"),
    "patch": _part("patch"), "compareTo": compare_to, "isGreaterThan": is_greater_than, "isLessThan": is_less_than,
    "charAt": char_at, "indexOf": index_of, "lastIndexOf": last_index_of,
    "lowerAscii": lambda s: _ascii(s, "lowerAscii", upper=False),
    "upperAscii": lambda s: _ascii(s, "upperAscii", upper=True),
    "replace": replace, "split": split, "substring": substring, "trim": trim, "join": join, "format": format_,
    "isSorted": is_sorted, "sum": sum_, "max": max_, "find": find, "findAll": find_all,
    "ip": ip_, "isIP": is_ip, "cidr": cidr_, "isCIDR": is_cidr, "family": family,
    "isUnspecified": _ip_test("isUnspecified"), "isLoopback": _ip_test("isLoopback"),
    "isLinkLocalMulticast": _ip_test("isLinkLocalMulticast"), "isLinkLocalUnicast": _ip_test("isLinkLocalUnicast"),
    "isGlobalUnicast": _ip_test("isGlobalUnicast"), "containsIP": contains_ip, "containsCIDR": contains_cidr,
    "masked": masked, "prefixLength": prefix_length, "string": to_string,
    "orValue": or_value, "hasValue": has_value, "value": value, "or": or_,
}
