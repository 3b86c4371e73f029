"""JSON for the CLI's hot paths through the interpreter's C accelerator (``_json``) alone.

``import json`` was about 2.5 ms of a ``hwagent launch`` client's ~11 ms above the bare
interpreter (bench/cli.py, docs/performance.md): its decoder and encoder compile
patterns with ``re`` at import, and ``re`` imports ``enum`` and ``functools``. The
parsing and encoding are ``_json``'s C code either way; this module drives that C
scanner and encoder itself, set up as ``json.loads`` and ``json.dumps`` set them up
with their defaults (strict strings, floats and ints as themselves, NaN and Infinity
read and written, non-ASCII escaped, ``", "`` and ``": "`` separators), so both give
the same values and the same text (tests/unit/workloads/test_jsonc.py).

What it does not do: indenting and sorted keys (``--format json`` output imports
``json``, off the hot path) and the ``json`` module's error messages: a document
that does not parse is a ``ValueError`` with the offset (the C scanner's own error,
``json.JSONDecodeError``, when it raises one). An interpreter without ``_json`` uses
``json`` itself.
"""

from __future__ import annotations

#: typing is not imported at run time: it is ~3 ms of the CLI's start-up (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["loads", "dumps"]

#: JSON's whitespace (RFC 8259): what may come before and after the document
_SPACE = " \t\n\r"


class _Context:
    """What the C scanner reads off a ``json.JSONDecoder`` made with no arguments."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    #: NaN, Infinity and -Infinity, which json reads as these floats (float() spells them alike)
    parse_constant = float


def _unencodable(o: object) -> Any:
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


try:
    from _json import encode_basestring_ascii as _ascii
    from _json import make_encoder as _make_encoder
    from _json import make_scanner as _make_scanner
except ImportError:  # pragma: no cover - CPython always has it; another interpreter gets json itself
    _scan = None
else:
    # typeshed types the context as a scanner; the C code reads only the attributes above
    _scan = _make_scanner(_Context())  # type: ignore[arg-type]


def loads(data: bytes | str) -> Any:
    """The value of a JSON document (UTF-8 if bytes), as ``json.loads`` reads it; ``ValueError`` if
    it is not one (``UnicodeDecodeError`` for bytes that are not UTF-8 is one)."""
    if _scan is None:  # pragma: no cover
        import json

        return json.loads(data)
    text = data.decode() if isinstance(data, (bytes, bytearray)) else data
    start = len(text) - len(text.lstrip(_SPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration as e:
        raise ValueError(f"not a JSON value at offset {e.value}") from None
    if text[end:].strip(_SPACE):
        raise ValueError(f"extra data after the JSON value at offset {end}")
    return value


def dumps(value: Any, sort_keys: bool = False) -> str:
    """``value`` as ``json.dumps(value, sort_keys=sort_keys)`` writes it (``TypeError`` for what JSON
    cannot hold, ``ValueError`` for a circular reference)."""
    if _scan is None:  # pragma: no cover
        import json

        return json.dumps(value, sort_keys=sort_keys)
    if isinstance(value, str):
        return str(_ascii(value))
    chunks = _make_encoder({}, _unencodable, _ascii, None, ": ", ", ", sort_keys, False, True)(value, 0)
    return "".join(chunks)
