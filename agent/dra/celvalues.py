"""The value semantics of the Kubernetes CEL environment DRA selectors run in,
over cel-python's types: the ``Quantity`` and ``Semver`` types, and cel-go's
heterogeneous equality and ordering.

cel-python compares like Python (``true == 1``) and refuses what cel-go allows
(``1 == 1.0``, ``1 < 0.5``, ``1 == "1"``); these functions replace its
operators so that a selector decides here as it does in the scheduler:

- ``==``: values of different types are unequal (``numaNode == "1"`` is false),
  except numbers, which compare by value (``1 == 1.0 == 1u``); a bool is not a
  number. A ``Quantity`` or ``Semver`` on the left compared with anything but
  its own type is an error ("no such overload"), as their Kubernetes types say.
- ``<`` and friends: numbers across int, uint and double; otherwise both sides
  of one type (string, bytes, bool, timestamp, duration); anything else,
  ``Quantity`` and ``Semver`` included (they have ``compareTo``), is an error.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from celpy import celtypes

__all__ = ["OptionalValue", "OPT_PREFIX", "rewrite_optional_select", "IP", "CIDR", "parse_ip", "parse_cidr", "Quantity", "Semver", "parse_quantity", "parse_semver", "cel_eq", "cel_cmp", "cel_in", "NoOverload"]


class NoOverload(TypeError):
    """No overload of an operator or function for these argument types (a CEL error)."""


# -- Quantity ----------------------------------------------------------------------------------

_QUANTITY = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_NANO = Fraction(1, 10**9)
_INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclass(frozen=True)
class Quantity:
    """A Kubernetes resource quantity (``kubernetes.Quantity``): an exact value, kept to
    nano precision and rounded up below it, as ``resource.Quantity`` keeps it."""

    value: Fraction

    def __str__(self) -> str:
        return str(self.value.numerator) if self.value.denominator == 1 else str(float(self.value))


def parse_quantity(text: str) -> Quantity:
    """``ValueError`` unless ``text`` is a quantity (``"1Ti"``, ``"500m"``, ``"1.5e3"``)."""
    m = _QUANTITY.fullmatch(text)
    if m is None:
        raise ValueError(f"quantities must match the regular expression '{_QUANTITY.pattern}'")
    sign, number, suffix = m.groups()
    value = Fraction(number)
    if suffix in _BINARY:
        value *= 1 << _BINARY[suffix]
    elif suffix in _DECIMAL:
        value *= Fraction(10) ** _DECIMAL[suffix]
    elif suffix:
        value *= Fraction(10) ** int(suffix[1:])
    if sign == "-":
        value = -value
    return Quantity(math.ceil(value / _NANO) * _NANO)


# -- Semver ------------------------------------------------------------------------------------

_NUM = r"(0|[1-9]\d*)"
_SEMVER = re.compile(rf"^{_NUM}\.{_NUM}\.{_NUM}(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$")


@dataclass(frozen=True)
class Semver:
    """A semantic version 2.0.0 (``kubernetes.Semver``): equality and order by precedence,
    build metadata ignored."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    def _key(self) -> tuple[Any, ...]:
        # a release sorts after its pre-releases; numeric identifiers before alphanumeric ones
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 1 if not self.pre else 0, pre)

    def compare(self, other: Semver) -> int:
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    def __str__(self) -> str:
        out = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            out += "-" + ".".join(self.pre)
        if self.build:
            out += "+" + ".".join(self.build)
        return out


def parse_semver(text: str, normalize: bool = False) -> Semver:
    """``ValueError`` unless ``text`` is a semantic version. ``normalize`` (the library's
    second argument) accepts a leading ``v``, a missing minor or patch and leading zeros."""
    if normalize:
        text = text[1:] if text.startswith("v") else text
        loose = re.fullmatch(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?([-+].*)?", text)
        if loose is not None:
            text = ".".join(str(int(g or 0)) for g in loose.groups()[:3]) + (loose.group(4) or "")
    m = _SEMVER.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not a semantic version")
    pre = tuple(m.group(4).split(".")) if m.group(4) else ()
    if any(p.isdigit() and len(p) > 1 and p[0] == "0" for p in pre):
        raise ValueError(f"{text!r}: numeric pre-release identifiers must not have leading zeros")
    build = tuple(m.group(5).split(".")) if m.group(5) else ()
    return Semver(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre, build)


# -- equality and ordering ---------------------------------------------------------------------

_NUMBERS = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)


def _is_number(v: Any) -> bool:
    return isinstance(v, _NUMBERS) and not isinstance(v, celtypes.BoolType)


def _num(v: Any) -> int | float:
    """A CEL number as a Python one (celpy's own types refuse to compare across int and double)."""
    return float(v) if isinstance(v, celtypes.DoubleType) else int(v)


def _kind(v: Any) -> type | None:
    """The CEL type family ``v`` compares within (numbers are one family)."""
    for t in (celtypes.BoolType, celtypes.StringType, celtypes.BytesType, celtypes.TimestampType,
              celtypes.DurationType, celtypes.ListType, celtypes.MapType, celtypes.TypeType):
        if isinstance(v, t):
            return t
    return None


def _type_name(cls: type) -> str:
    """The CEL type a cel-python type value stands for: cel-python gives ``type(x)`` and the
    identifiers ``int``, ``map``, ``null_type``... as Python classes (``IntType``, a subclass of
    ``MapType`` for the device's domain map, ``NoneType``), so a class is named by its nearest
    CEL ancestor."""
    names = {celtypes.BoolType: "bool", celtypes.IntType: "int", celtypes.UintType: "uint",
             celtypes.DoubleType: "double", celtypes.StringType: "string", celtypes.BytesType: "bytes",
             celtypes.ListType: "list", celtypes.MapType: "map", celtypes.TypeType: "type",
             type(None): "null_type", celtypes.TimestampType: "google.protobuf.Timestamp",
             celtypes.DurationType: "google.protobuf.Duration", type: "type"}
    for klass in cls.__mro__:
        if klass in names:
            return names[klass]
    return f"{cls.__module__}.{cls.__qualname__}"


def cel_eq(a: Any, b: Any) -> bool:  # noqa: C901 - one case per CEL type family
    """cel-go's ``==``; ``NoOverload`` where the left operand's type has no equality with the right's."""
    if isinstance(a, type) or isinstance(b, type):  # type values (``type(x) == int``)
        return isinstance(a, type) and isinstance(b, type) and _type_name(a) == _type_name(b)
    if isinstance(a, Quantity):
        if not isinstance(b, Quantity):
            raise NoOverload(f"no such overload: Quantity == {type(b).__name__}")
        return a.value == b.value
    if isinstance(a, Semver):
        if not isinstance(b, Semver):
            raise NoOverload(f"no such overload: Semver == {type(b).__name__}")
        return a.compare(b) == 0
    if isinstance(a, (IP, CIDR)):
        if type(b) is not type(a):
            raise NoOverload(f"no such overload: {type(a).__name__} == {type(b).__name__}")
        return bool(a == b)
    if a is None or b is None:
        return a is None and b is None
    if _is_number(a):
        return _is_number(b) and _num(a) == _num(b)
    kind: Any = _kind(a)
    if kind is None or not isinstance(b, kind):
        return False
    if kind is celtypes.ListType:
        return len(a) == len(b) and all(cel_eq(x, y) for x, y in zip(a, b, strict=True))
    if kind is celtypes.MapType:
        if len(a) != len(b):
            return False
        for k, v in a.items():
            other = _lookup(b, k)
            if other is _MISSING or not cel_eq(v, other):
                return False
        return True
    return bool(a == b)


_MISSING = object()


def _lookup(m: Any, key: Any) -> Any:
    """A map's value for ``key`` by CEL equality (``m[1]`` finds the key ``1u``), or ``_MISSING``."""
    for k, v in m.items():
        if type(k) is type(key) or (_is_number(k) and _is_number(key)):
            if cel_eq(k, key):
                return v
    return _MISSING


_ORDERED = (celtypes.BoolType, celtypes.StringType, celtypes.BytesType, celtypes.TimestampType, celtypes.DurationType)


def cel_cmp(a: Any, b: Any) -> int:
    """cel-go's ordering (-1, 0, 1); ``NoOverload`` where the two are not ordered."""
    if _is_number(a) and _is_number(b):
        x, y = _num(a), _num(b)
        if isinstance(x, float) and math.isnan(x) or isinstance(y, float) and math.isnan(y):
            raise NoOverload("NaN is not ordered")
        return (x > y) - (x < y)
    kind = _kind(a)
    if kind in _ORDERED and isinstance(b, kind):
        return (a > b) - (a < b)
    raise NoOverload(f"no such overload: {type(a).__name__} < {type(b).__name__}")


def cel_in(item: Any, container: Any) -> bool:
    """``item in container``: a list holds an element equal to it, a map such a key."""
    if isinstance(container, celtypes.MapType):
        return _lookup(container, item) is not _MISSING
    if isinstance(container, celtypes.ListType):
        failed: NoOverload | None = None
        for x in container:
            try:
                if cel_eq(x, item):
                    return True
            except NoOverload as e:
                failed = e
        if failed is not None:
            raise failed
        return False
    raise NoOverload(f"no such overload: {type(item).__name__} in {type(container).__name__}")


# -- optional values (cel-go's optional types) -----------------------------------------------------

@dataclass(frozen=True)
class OptionalValue:
    """``optional.of(x)`` or ``optional.none()``: what ``m.?key`` gives."""

    value: Any = None
    present: bool = False


OPT_PREFIX = "__hwagent_opt__"


def rewrite_optional_select(expression: str) -> str:
    """``m.?key`` as ``m.__hwagent_opt__key``, which cel-python's grammar parses (outside string
    literals; the evaluator turns it back into an optional field selection)."""
    out, i, n = [], 0, len(expression)
    while i < n:
        c = expression[i]
        if c in "\"'":
            quote = expression[i:i + 3] if expression[i:i + 3] in ('"""', "'''") else c
            j = i + len(quote)
            while j < n and expression[j:j + len(quote)] != quote:
                j += 2 if expression[j] == "\\" else 1
            j = min(n, j + len(quote))
            out.append(expression[i:j])
            i = j
            continue
        if expression.startswith(".?", i) and i + 2 < n and (expression[i + 2].isalpha() or expression[i + 2] == "_"):
            out.append("." + OPT_PREFIX)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


# -- IP and CIDR (Kubernetes' ip and cidr libraries) -------------------------------------------------

@dataclass(frozen=True)
class IP:
    """``net.IP``: an address with no zone, an IPv4-mapped IPv6 address refused, as Kubernetes' ``ip()``."""

    address: Any

    def __str__(self) -> str:
        return str(self.address)


@dataclass(frozen=True)
class CIDR:
    """``net.CIDR``: an address and prefix length (host bits may be set, as ``netip.Prefix`` allows)."""

    interface: Any

    def __str__(self) -> str:
        return str(self.interface)


def parse_ip(text: str) -> IP:
    import ipaddress

    if "%" in text:
        raise ValueError("IP address with zone value is not allowed")
    addr = ipaddress.ip_address(text)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError("IPv4-mapped IPv6 address is not allowed")
    return IP(addr)


def parse_cidr(text: str) -> CIDR:
    import ipaddress

    if "/" not in text:
        raise ValueError("network address parse error: no prefix length")
    addr, _, plen = text.partition("/")
    parse_ip(addr)
    if not plen.isdigit() or (len(plen) > 1 and plen[0] == "0"):
        raise ValueError(f"bad prefix length {plen!r}")
    return CIDR(ipaddress.ip_interface(text))
