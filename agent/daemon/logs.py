"""Log records as one logfmt line each on stderr, readable in a terminal and in journald.

A node agent's logs are read with ``journalctl -u hwagent`` and grepped by
machines, so every record is one line of ``key=value`` pairs:

    ts=2026-11-30T07:42:37.123Z level=info logger=hwagent.daemon msg="component started" component=cpu

Fields passed with ``extra={...}`` become extra pairs, and so do the pairs of a
message written in the project's ``"event key=%s"`` convention. Under journald (stderr is
the stream named by ``$JOURNAL_STREAM``) the timestamp is dropped, since journald
stamps each line itself, and each line starts with a ``<N>`` syslog priority so
``journalctl -p warning`` works.

Warnings and errors are rate-limited per message (:class:`RepeatLimiter`): a
client that sends the same bad request a thousand times a second must not turn
the journal into a copy of its traffic. A few lines per message pass in each
window; the rest are counted in ``hwagent_log_lines_suppressed_total`` and the
first line of the next window says ``suppressed=N``.
"""

from __future__ import annotations

import ast
import logging
import os
import re
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import IO, Any

from prometheus_client import Counter

__all__ = [
    "LEVELS",
    "LogfmtFormatter",
    "RepeatLimiter",
    "logfmt_value",
    "setup_logging",
    "split_event",
    "stream_is_journald",
]

SUPPRESSED = Counter(
    "hwagent_log_lines_suppressed_total",
    "Warning and error log lines dropped as repeats of the same message, by logger and level",
    ["logger", "level"],
)

#: the names accepted by --log-level and [daemon] log_level
LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

#: logging level -> syslog priority (sd-daemon(3) prefixes)
_SYSLOG_PRIORITY = (
    (logging.CRITICAL, 2),
    (logging.ERROR, 3),
    (logging.WARNING, 4),
    (logging.INFO, 6),
)

#: attributes every LogRecord has; anything else came from ``extra=``
_RECORD_ATTRS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


#: fields every line has; a message field of the same name stays inside msg
_FIXED_KEYS = frozenset({"ts", "level", "logger", "msg", "exc"})

_EVENT = re.compile(r"[A-Za-z_][\w.:/-]*")
_PAIR = re.compile(r"""\s+([A-Za-z_]\w*)=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s'"]\S*|)(?=\s|$)""")


def split_event(message: str) -> tuple[str, list[tuple[str, str]]] | None:
    """Parse the project's ``event key=value ...`` message convention.

    Values may be bare tokens or Python string reprs (``reason=%r``). Returns
    None for anything else (free text, a trailing remark), which is then logged
    whole as ``msg="..."``: nothing is ever dropped or reordered.
    """
    m = _EVENT.match(message)
    if m is None:
        return None
    pairs: list[tuple[str, str]] = []
    pos = m.end()
    while pos < len(message):
        p = _PAIR.match(message, pos)
        if p is None:
            return None
        key, raw = p.group(1), p.group(2)
        if raw[:1] in ("'", '"'):
            try:
                value = ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                return None
            if not isinstance(value, str):
                return None
        else:
            value = raw
        pairs.append((key, value))
        pos = p.end()
    return m.group(0), pairs


def syslog_priority(levelno: int) -> int:
    for threshold, prio in _SYSLOG_PRIORITY:
        if levelno >= threshold:
            return prio
    return 7


def logfmt_value(value: Any) -> str:
    """Quote a value when it would otherwise not read back as one token."""
    if isinstance(value, bool):
        return "true" if value else "false"
    s = str(value)
    if s and not any(c in s for c in ' "=\\\n\r\t') and s.isprintable():
        return s
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    out = out.replace("\t", "\\t")
    # other control characters would break the one-line promise
    out = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in out)
    return f'"{out}"'


class LogfmtFormatter(logging.Formatter):
    """One record -> one logfmt line; tracebacks are folded into ``exc="..."``."""

    def __init__(self, journald: bool = False) -> None:
        super().__init__()
        self.journald = journald

    def format(self, record: logging.LogRecord) -> str:
        parts: list[str] = []
        if not self.journald:
            t = time.gmtime(record.created)
            ms = int(record.msecs)
            parts.append(f"ts={time.strftime('%Y-%m-%dT%H:%M:%S', t)}.{ms:03d}Z")
        parts.append(f"level={record.levelname.lower()}")
        parts.append(f"logger={logfmt_value(record.name)}")
        extras = [(k, v) for k, v in record.__dict__.items() if k not in _RECORD_ATTRS and not k.startswith("_")]
        message = record.getMessage()
        split = split_event(message)
        taken = _FIXED_KEYS | {k for k, _ in extras}
        if split is not None and not any(k in taken for k, _ in split[1]):
            # "event key=value" messages become real fields instead of one quoted string
            event, pairs = split
            parts.append(f"msg={logfmt_value(event)}")
            parts.extend(f"{k}={logfmt_value(v)}" for k, v in pairs)
        else:
            parts.append(f"msg={logfmt_value(message)}")
        parts.extend(f"{k}={logfmt_value(v)}" for k, v in extras)
        if record.exc_info:
            parts.append(f"exc={logfmt_value(self.formatException(record.exc_info).rstrip())}")
        elif record.exc_text:
            parts.append(f"exc={logfmt_value(record.exc_text.rstrip())}")
        line = " ".join(parts)
        if self.journald:
            line = f"<{syslog_priority(record.levelno)}>{line}"
        return line


class RepeatLimiter(logging.Filter):
    """Lets ``burst`` records of one message through per ``interval`` seconds.

    "One message" is the logger, the level and the unformatted template (the
    project logs ``"event key=%s"``), so a flood of one refusal with varying
    arguments counts as one. Debug and info records always pass.
    """

    DEFAULT_BURST = 5
    DEFAULT_INTERVAL = 10.0
    #: distinct messages remembered; the least recently seen is forgotten first
    MAX_KEYS = 1024

    def __init__(self, burst: int = DEFAULT_BURST, interval: float = DEFAULT_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.burst = burst
        self.interval = interval
        self._clock = clock
        #: key -> [window start, passed in window, suppressed since the last pass]
        self._state: OrderedDict[tuple[Any, ...], list[float]] = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        exc = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else None
        key = (record.name, record.levelno, str(record.msg), exc)
        now = self._clock()
        st = self._state.get(key)
        if st is None:
            st = self._state[key] = [now, 0, 0]
            if len(self._state) > self.MAX_KEYS:
                self._state.popitem(last=False)
        else:
            self._state.move_to_end(key)
        if now - st[0] >= self.interval:
            st[0], st[1] = now, 0
        if st[1] < self.burst:
            st[1] += 1
            if st[2]:
                record.suppressed = int(st[2])
                st[2] = 0
            return True
        st[2] += 1
        SUPPRESSED.labels(record.name, record.levelname.lower()).inc()
        return False


def stream_is_journald(stream: IO[str], environ: dict[str, str] | None = None) -> bool:
    """Whether ``stream`` is the journald stream systemd announced in $JOURNAL_STREAM.

    Checked by device:inode rather than presence of the variable alone: a child
    whose stderr was redirected inherits the variable but not the stream.
    """
    env = os.environ if environ is None else environ
    value = env.get("JOURNAL_STREAM", "")
    dev, sep, ino = value.partition(":")
    if not sep or not dev.isdigit() or not ino.isdigit():
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return st.st_dev == int(dev) and st.st_ino == int(ino)


def setup_logging(level: str = "info", stream: IO[str] | None = None, journald: bool | None = None) -> logging.Handler:
    """Route the ``hwagent`` logger tree (and stray library warnings) to one stream.

    Returns the handler so callers (tests, a second ``run`` in one process) can remove it.
    """
    stream = sys.stderr if stream is None else stream
    if journald is None:
        journald = stream_is_journald(stream)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(LogfmtFormatter(journald=journald))
    handler.addFilter(RepeatLimiter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_hwagent", False)]:
        root.removeHandler(old)
    handler._hwagent = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    # libraries (grpc, asyncio) speak at warning and above; our own tree at the chosen level
    root.setLevel(logging.WARNING)
    logging.getLogger("hwagent").setLevel(LEVELS[level])
    logging.captureWarnings(True)
    return handler
