"""File and directory names hwagent derives from what callers name things (pods, namespaces, UIDs).

A pod name may be 253 bytes and a namespace 63, so ``<namespace>_<name>`` can
pass the 255 bytes a directory entry holds (the pod then failed to start with
ENAMETOOLONG). ``disk_name`` maps the parts of an identity to one name that
always fits, is safe as a single path component, and never collides:

- a name of plain characters (``A-Z a-z 0-9 . _ -``, not starting with ``.``,
  no part holding the separator) that fits is used as it is, so every name
  hwagent wrote before keeps its place on disk and a restart finds it;
- anything else (too long, other bytes, a leading dot, a part holding the
  separator) keeps a readable prefix, other bytes escaped as ``%XX``, and ends in
  ``~`` and 16 hex digits of a SHA-256 over the full identity. ``~`` and ``%``
  never appear in a plain name, so a derived name cannot equal a plain one, and
  two derived names differ unless 64 bits of SHA-256 collide.

Pure: no I/O, the same answer on every machine, so ``hwagent logs`` finds what
the runtime wrote by computing the same name.
"""

from __future__ import annotations

__all__ = ["NAME_MAX", "disk_name"]

#: the most bytes one directory entry holds (Linux NAME_MAX)
NAME_MAX = 255
#: hex digits of the identity's hash in a derived name
HASH_HEX = 16
_PLAIN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_PLAIN_BYTES = bytes(sorted(_PLAIN))


def _all_plain(raw: bytes) -> bool:
    """Every byte plain: what is left once they are deleted is nothing (one C call, not a
    Python step per byte; the daemon names ~9 files and directories per pod launched)."""
    return not raw.translate(None, _PLAIN_BYTES)


def _escape(part: str) -> str:
    return "".join(chr(b) if b in _PLAIN else f"%{b:02X}" for b in part.encode("utf-8", "surrogateescape"))


def _identity_hash(parts: tuple[str, ...]) -> str:
    # imported here: only a derived name needs it, and `launch --wait` computes a plain log dir name
    # (hashlib is ~2 ms of its start-up, tests/unit/test_cli_imports.py)
    import hashlib

    h = hashlib.sha256()
    for p in parts:  # length-prefixed: ("a_b", "c") and ("a", "b_c") hash differently
        raw = p.encode("utf-8", "surrogateescape")
        h.update(len(raw).to_bytes(8, "big") + raw)
    return h.hexdigest()[:HASH_HEX]


def disk_name(*parts: str, sep: str = "_", reserve: int = 0) -> str:
    """One path component for the identity ``parts``, at most ``NAME_MAX - reserve`` bytes.

    ``reserve`` leaves room for what the caller appends (``.json``, ``.log.10``).
    Callers with a fixed number of parts (a log dir is always (namespace, name))
    get distinct names for distinct identities.
    """
    limit = NAME_MAX - reserve
    if not parts or limit <= HASH_HEX + 2:
        raise ValueError(f"disk_name needs at least one part and room for its hash, got {parts!r}, reserve {reserve}")
    if sep.encode() == b"" or not _all_plain(sep.encode()):
        raise ValueError(f"separator {sep!r} must be plain characters")
    plain = sep.join(parts)
    if (
        all(p and sep not in p for p in parts)
        and not plain.startswith(".")
        and _all_plain(plain.encode("utf-8", "surrogateescape"))
        and len(plain) <= limit
    ):
        return plain
    tag = "~" + _identity_hash(parts)
    readable = sep.join(_escape(p) for p in parts)
    if readable.startswith("."):
        readable = "%2E" + readable[1:]
    cut = readable[: limit - len(tag)]
    # never end on half an escape: "%4" would read as something it is not
    pct = cut.rfind("%", max(0, len(cut) - 2))
    if pct != -1:
        cut = cut[:pct]
    return cut + tag
