"""Log records as one logfmt line each on stderr, readable in a terminal and in journald.

A node agent's logs are read with ``journalctl -u hwagent`` and grepped by
machines, so every record is one line of ``key=value`` pairs:

    ts=2026-11-30T07:42:37.123Z level=info logger=hwagent.daemon msg="component started" component=cpu

The project logs one way: a module's logger comes from
:func:`agent.eventlog.get_logger`, and a
call names an *event* (a short lowercase phrase, the same every time: "cpu
policy started", "allocation refused") and passes what varies as keyword
fields (``log.info("pod admitted", pod=key, qos=qos)``). The event is ``msg``;
each field becomes one more pair, in call order. Nothing is interpolated into
the message, so nothing has to be parsed back out of it, and a grep for an
event finds every line of it. Under journald (stderr is the stream named by
``$JOURNAL_STREAM``) the timestamp is dropped, since journald stamps each line
itself, and each line starts with a ``<N>`` syslog priority so ``journalctl -p
warning`` works.

Warnings and errors are rate-limited per event (:class:`RepeatLimiter`): a
client that sends the same bad request a thousand times a second must not turn
the journal into a copy of its traffic. A few lines per event pass in each
window; the rest are counted in ``hwagent_log_lines_suppressed_total`` and the
first line of the next window says ``suppressed=N``.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from collections.abc import Mapping
from typing import IO, Any

from prometheus_client import Counter

from agent.eventlog import FIELDS_ATTR

__all__ = [
    "LEVELS",
    "LogfmtFormatter",
    "RepeatLimiter",
    "logfmt_value",
    "setup_logging",
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

#: fields every line has; a call field of the same name is written with a trailing ``_``
_FIXED_KEYS = frozenset({"ts", "level", "logger", "msg", "exc", "suppressed"})

def syslog_priority(levelno: int) -> int:
    for threshold, prio in _SYSLOG_PRIORITY:
        if levelno >= threshold:
            return prio
    return 7


#: what makes a value more than one token (one C-level search: ~30 values per pod launched)
_NEEDS_QUOTES = re.compile(r'[ "=\\\n\r\t]')


def logfmt_value(value: Any) -> str:
    """Quote a value when it would otherwise not read back as one token."""
    if isinstance(value, bool):
        return "true" if value else "false"
    s = str(value)
    if s and not _NEEDS_QUOTES.search(s) and s.isprintable():
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
        parts.append(f"msg={logfmt_value(record.getMessage())}")
        fields = getattr(record, FIELDS_ATTR, None)
        if isinstance(fields, Mapping):
            for k, v in fields.items():
                parts.append(f"{k}_={logfmt_value(v)}" if k in _FIXED_KEYS else f"{k}={logfmt_value(v)}")
        suppressed = getattr(record, "suppressed", None)
        if suppressed:
            parts.append(f"suppressed={suppressed}")
        if record.exc_info:
            parts.append(f"exc={logfmt_value(self.formatException(record.exc_info).rstrip())}")
        elif record.exc_text:
            parts.append(f"exc={logfmt_value(record.exc_text.rstrip())}")
        line = " ".join(parts)
        if self.journald:
            line = f"<{syslog_priority(record.levelno)}>{line}"
        return line


class RepeatLimiter(logging.Filter):
    """Lets ``burst`` records of one event through per ``interval`` seconds.

    "One event" is the logger, the level, the event (the message, which the
    convention keeps free of values) and the exception type: the fields vary
    from line to line, the event does not, so a flood of one refusal with
    varying requests counts as one. Debug and info records always pass.
    """

    DEFAULT_BURST = 5
    DEFAULT_INTERVAL = 10.0
    #: distinct events remembered; the least recently seen is forgotten first
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
