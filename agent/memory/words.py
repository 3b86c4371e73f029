"""Memory amounts as a person reads them (pure): ``23.5 GiB``, ``0 × 2 MiB pages``.

Refusals and the free summaries name amounts this way; the exact quantities
(``24683772Ki``) stay in JSON and in the views' columns, where scripts read them.
"""

from __future__ import annotations

from agent.memory.sysfs import page_size_of

__all__ = ["human_bytes", "memory_phrase"]

_UNITS = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def human_bytes(n: int) -> str:
    """``25276182528`` -> ``23.5 GiB``: the largest unit the amount reaches, at most one
    decimal (dropped when it is 0); below 1 KiB in bytes. Rounded down, so a free amount
    is never overstated."""
    for unit, size in _UNITS:
        if n >= size:
            whole, frac = divmod(n * 10 // size, 10)
            return f"{whole} {unit}" if frac == 0 else f"{whole}.{frac} {unit}"
    return f"{n} B"


def memory_phrase(resource: str, amount: int) -> str:
    """``23.5 GiB memory`` or ``0 × 2 MiB pages``: hugepages are counted in pages of their
    size (what nr_hugepages counts), other memory in bytes."""
    page = page_size_of(resource)
    if page is None:
        return f"{human_bytes(amount)} {resource}"
    pages = amount // page
    return f"{pages} × {human_bytes(page)} {'page' if pages == 1 else 'pages'}"
