"""Kubernetes resource quantities, parsed strictly (``resource.Quantity`` grammar).

``agent/cpu/quantity.py`` takes numbers that are already parsed (the QRM wire
carries floats); manifests carry the API server's strings ("500m", "1.5",
"2Gi", "1e3"), so the grammar lives here, once, at the edge. Values are exact
``Fraction``s; callers round the way the API server's ``MilliValue``/``Value``
do (up). Anything the API server would refuse is refused: signs other than
one leading ``+``/``-``, empty mantissas, unknown suffixes, a mix of exponent
and suffix, and absurdly long strings.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = ["QuantityError", "parse_quantity", "to_milli", "to_units", "format_bytes", "MAX_QUANTITY_LEN"]

#: the API server refuses longer quantity strings too (a number is never this long)
MAX_QUANTITY_LEN = 64

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
}
_GRAMMAR = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<exp>[eE][+-]?[0-9]{1,3})|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


class QuantityError(ValueError):
    """Not a Kubernetes quantity; the message quotes the value."""


def parse_quantity(text: object) -> Fraction:
    """The exact value of a quantity string (an int or float from YAML is accepted as its decimal text)."""
    if isinstance(text, bool):
        raise QuantityError(f"quantity must be a string or a number, got {text!r}")
    if isinstance(text, int):
        text = str(text)
    elif isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"quantity must be finite, got {text!r}")
        text = repr(text)
    if not isinstance(text, str):
        raise QuantityError(f"quantity must be a string or a number, got {type(text).__name__}")
    if len(text) > MAX_QUANTITY_LEN:
        raise QuantityError(f"quantity is longer than {MAX_QUANTITY_LEN} characters")
    m = _GRAMMAR.match(text)
    if m is None:
        raise QuantityError(f"{text!r} is not a quantity (e.g. 2, 500m, 1.5, 4Gi, 1e3)")
    value = Fraction(m["num"])
    if m["exp"]:
        value *= Fraction(10) ** int(m["exp"][1:])
    else:
        suffix = m["suffix"] or ""
        value *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    return -value if m["sign"] == "-" else value


def to_milli(value: Fraction) -> int:
    """Milli-units rounded up, as ``Quantity.MilliValue`` does (a CPU of 0.0001 is 1m)."""
    return math.ceil(value * 1000)


def to_units(value: Fraction) -> int:
    """Whole units rounded up, as ``Quantity.Value`` does (memory bytes, device counts)."""
    return math.ceil(value)


def format_bytes(n: int) -> str:
    """Bytes as the largest exact binary quantity ("512Mi", "2Gi", "1536Mi"; "100" when none is exact):
    how refusals and views name memory amounts, readable back by ``parse_quantity``."""
    for shift, suffix in ((40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{suffix}"
    return str(n)
