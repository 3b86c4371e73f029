"""Reading back the JSON-lines records hwagent appends (``evictions.jsonl``, the advisor's
``decisions.jsonl``): the tail of a file that may be large, its first (cut) line dropped, and a
torn or foreign line skipped rather than failing the reader.

Standard library only: ``hwagent explain`` reads the decisions on the CLI's light path.
"""

from __future__ import annotations

import json
import os

#: typing is not imported at run time (the CLI's start-up cost); mypy reads it
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = ["PRIVATE_MODE", "append_record", "parse_records", "read_tail"]

#: the records name users' pods: root's alone (issue 32 item 7; the umask made them 0644)
PRIVATE_MODE = 0o600


def parse_records(text: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines text; a torn or foreign line is skipped."""
    out = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def read_tail(path: str | Path, keep: int, max_bytes: int) -> list[dict[str, Any]]:
    """The last ``keep`` records of the file's last ``max_bytes``; none when it is absent."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return []
    if size > max_bytes:
        data = data.partition(b"\n")[2]  # the first line read is cut
    return parse_records(data.decode(errors="replace"))[-keep:]


def append_record(path: str | Path, rec: dict[str, Any]) -> None:
    """Append one record as a line, creating the file ``PRIVATE_MODE`` (never through a link)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, PRIVATE_MODE)
    try:
        os.write(fd, (json.dumps(rec, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)
