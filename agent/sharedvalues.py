"""One object for each value that many entries of the daemon's state repeat.

A restart decodes every CPU entry, device allocation and pod record from its own
JSON text, so the 10,000th pod's namespace, QoS level, container type and label
map are the 10,000th copy of the same value (issue 24: RSS at 10,000 pods). The
decoders pass such values through here and keep the one copy. Nothing is changed
on disk, and the values compare equal to what they replace.

A shared map is shared: the entries that hold it never mutate it (they are
frozen records whose maps are replaced, never edited); a caller that wants to
edit one copies it first (``dict(m)``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

__all__ = ["text", "shared_map", "MAX_SHARED_MAPS"]

#: distinct maps kept; past it the table starts again (a node with more distinct
#: label sets than this shares less, it never holds more)
MAX_SHARED_MAPS = 4096

_MAPS: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
_EMPTY: tuple[tuple[str, str], ...] = ()


def text(s: str) -> str:
    """The one copy of ``s`` (``sys.intern``: freed with its last holder). For values
    that repeat across entries (namespaces, levels, types, pool and resource names,
    label keys and values); a value unique to an entry (a uid) gains nothing."""
    return sys.intern(s)


def shared_map(m: Mapping[str, str]) -> dict[str, str]:
    """The one dict equal to ``m`` (in the same order), its keys and values
    interned. Not to be mutated: it is held by every entry with that map."""
    key = tuple(m.items()) if m else _EMPTY
    got = _MAPS.get(key)
    if got is None:
        if len(_MAPS) >= MAX_SHARED_MAPS:
            _MAPS.clear()
        got = {sys.intern(k): sys.intern(v) for k, v in key}
        _MAPS[tuple(got.items())] = got  # keyed by the interned copies, not the caller's
    return got
