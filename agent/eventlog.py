"""The project's logger: ``log = get_logger("hwagent.cpu")``, then ``log.info("event", key=value)``.

A call names an *event*, a short lowercase phrase that is the same on every line
of its kind ("cpu policy started", "allocation refused"), and passes what varies
as keyword fields. The fields travel on the record, unformatted, for
:class:`agent.daemon.logs.LogfmtFormatter` to write as ``key=value`` pairs; the
message is never interpolated, so nothing has to be parsed back out of it.

This module is stdlib only and apart from the daemon's run time: the topology,
device and state-file readers log through it, and the CLI commands that use them
must not load the daemon (``hwagent topology`` is checked to load no
``agent.daemon`` module).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import Any

__all__ = ["FIELDS_ATTR", "EventLogger", "get_logger"]

#: the record attribute that carries a call's keyword fields, in call order
FIELDS_ATTR = "fields"

#: keywords that keep their :mod:`logging` meaning; every other keyword is a field
_CALL_KEYWORDS = frozenset({"exc_info", "stack_info", "stacklevel", "extra"})


class EventLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger whose calls are ``log.info(event, **fields)``.

    The keyword fields travel on the record as one mapping (:data:`FIELDS_ATTR`)
    rather than as record attributes, so a field may be called ``name`` or
    ``module`` without colliding with what :class:`logging.LogRecord` already
    has. ``exc_info``, ``stack_info``, ``stacklevel`` and ``extra`` keep their
    meaning. Only :meth:`process` is overridden, so the caller found for a record
    (``funcName``, ``lineno``) is the module that logged, not this one.
    """

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        fields = {k: kwargs.pop(k) for k in [k for k in kwargs if k not in _CALL_KEYWORDS]}
        if fields:
            extra: Mapping[str, object] = kwargs.get("extra") or {}
            kwargs["extra"] = {**extra, FIELDS_ATTR: fields}
        return msg, kwargs


def get_logger(name: str) -> EventLogger:
    """The project's module logger: ``log = get_logger("hwagent.cpu")``."""
    return EventLogger(logging.getLogger(name))
