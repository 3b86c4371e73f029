"""List pages (pure): which pods a page holds and the token that names where the next begins.

A page is taken from the registry's ordered keys (``Registry.keys_after``), so it
costs its own size, not a pass over every pod (issue 24). The token is the last
key the page returned, ``namespace/name`` (neither may hold a ``/``), as the
Kubernetes API's ``continue`` names where a listing resumes: a pod present for
the whole listing is listed exactly once, one admitted or removed in between
may or may not be.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from agent.workloads.errors import AdmissionError

__all__ = ["page_token", "token_key", "take_page"]

T = TypeVar("T")


def page_token(key: tuple[str, str]) -> str:
    return f"{key[0]}/{key[1]}"


def token_key(token: str) -> tuple[str, str] | None:
    """The key a token names (None for the empty token: the first page); INVALID_ARGUMENT
    for a token no reply gave."""
    if not token:
        return None
    ns, sep, name = token.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise AdmissionError("INVALID_ARGUMENT", f"page token {token[:80]!r} is not one a List reply gave "
                             "(its next_page_token); list again from the first page", "bad_request")
    return ns, name


def take_page(keys: Iterable[tuple[str, str]], lookup: Callable[[tuple[str, str]], T | None],
              visible: Callable[[T], bool], limit: int) -> tuple[list[T], str]:
    """Up to ``limit`` (0: no limit) visible items in ``keys`` order, and the next page's
    token: empty when nothing visible follows, so the last page is never an empty one."""
    if limit < 0:
        raise AdmissionError("INVALID_ARGUMENT", f"limit must be 0 (every pod) or more, got {limit}",
                             "bad_request")
    out: list[T] = []
    last: tuple[str, str] | None = None
    for key in keys:
        item = lookup(key)
        if item is None or not visible(item):
            continue
        if limit and len(out) == limit:
            assert last is not None
            return out, page_token(last)
        out.append(item)
        last = key
    return out, ""
