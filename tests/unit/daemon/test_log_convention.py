"""Every log call in agent/ follows the one convention of agent/eventlog.py (formatted by agent/daemon/logs.py).

``log = get_logger("hwagent.x")`` at module top; ``log.info("event phrase",
key=value)``: the event a literal lowercase phrase (no punctuation, nothing
interpolated), what varies in snake_case keyword fields, no ``%`` arguments, no
``extra=``. Checked on the source with ``ast``, so a new module cannot drift
back to the old ``"event key=%s"`` strings without this test saying where.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

AGENT = Path(__file__).resolve().parents[3] / "agent"
LEVELS = {"debug", "info", "warning", "error", "exception", "critical"}
LOGGER_NAMES = {"log", "logger", "_log"}
LOGGER_ATTRS = {"log", "_log", "logger"}
EVENT = re.compile(r"[a-z0-9]+(?: [a-z0-9]+)*\Z")
FIELD = re.compile(r"[a-z][a-z0-9_]*\Z")
#: keywords of logging itself, not fields (extra= is refused separately)
CALL_KEYWORDS = {"exc_info", "stack_info", "stacklevel"}


def _is_logger(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id in LOGGER_NAMES) or (
        isinstance(node, ast.Attribute) and node.attr in LOGGER_ATTRS
    )


def _log_method(func: ast.expr) -> str | None:
    """The level method a call's func names (``log.info``, ``(log.error if x else log.info)``), or None."""
    if isinstance(func, ast.IfExp):
        a, b = _log_method(func.body), _log_method(func.orelse)
        return a if a and b else None
    if isinstance(func, ast.Attribute) and func.attr in LEVELS | {"log"}:
        if _is_logger(func.value) or (isinstance(func.value, ast.Name) and func.value.id == "logging"):
            return func.attr
    return None


def _is_get_logger_call(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Attribute) and node.func.attr in {"getLogger", "LoggerAdapter"})
        or (isinstance(node.func, ast.Name) and node.func.id in {"getLogger", "LoggerAdapter"})
    )


def violations(source: str, where: str) -> list[str]:
    tree = ast.parse(source)
    out: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None and _is_get_logger_call(stmt.value):
            out.append(f"{where}:{stmt.lineno}: module logger not made by agent.eventlog.get_logger")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        method = _log_method(node.func)
        if method is None:
            continue
        at = f"{where}:{node.lineno}"
        if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and \
                node.func.value.id == "logging":
            out.append(f"{at}: logs through the root logger (logging.{method}); use the module's get_logger")
            continue
        args = node.args[1:] if method == "log" else node.args
        if not args or not isinstance(args[0], ast.Constant) or not isinstance(args[0].value, str):
            out.append(f"{at}: the event is not a string literal")
        elif not EVENT.match(args[0].value):
            out.append(f"{at}: event {args[0].value!r} is not a lowercase phrase (words and spaces)")
        if len(args) > 1:
            out.append(f"{at}: %-interpolation arguments; pass keyword fields")
        for kw in node.keywords:
            if kw.arg is None:
                out.append(f"{at}: **fields: name each field")
            elif kw.arg == "extra":
                out.append(f"{at}: extra=: pass keyword fields")
            elif kw.arg not in CALL_KEYWORDS and not FIELD.match(kw.arg):
                out.append(f"{at}: field {kw.arg!r} is not snake_case")
    return out


def _modules() -> list[Path]:
    return sorted(p for p in AGENT.rglob("*.py") if "api" not in p.relative_to(AGENT).parts[:1])


def test_every_log_call_in_agent_follows_the_convention():
    found = [v for p in _modules() for v in violations(p.read_text(), str(p.relative_to(AGENT.parent)))]
    assert not found, "\n".join(found)


def test_the_checker_finds_logs_in_the_agent_tree():
    # the walk must actually reach the log calls, or the test above would pass on nothing
    calls = 0
    for p in _modules():
        calls += sum(isinstance(n, ast.Call) and _log_method(n.func) is not None for n in ast.walk(ast.parse(p.read_text())))
    assert calls > 150


@pytest.mark.parametrize(
    "line, complaint",
    [
        ('log = logging.getLogger("hwagent.x")', "module logger not made"),
        ('log = logging.LoggerAdapter(logging.getLogger("hwagent.x"), {})', "module logger not made"),
        ('log.info("pod_started pod=%s", uid)', "not a lowercase phrase"),
        ('log.info("pod started pod=%s", uid)', "not a lowercase phrase"),
        ('log.info("pod started", uid)', "%-interpolation"),
        ('log.warning(f"pod {uid} started")', "not a string literal"),
        ('log.warning("config reload refused; running on")', "not a lowercase phrase"),
        ('log.error("Cannot start")', "not a lowercase phrase"),
        ('log.info("component started", extra={"component": c})', "extra="),
        ('self.log.info("component started", **fields)', "**fields"),
        ('(log.error if failed else log.info)("stop requested", Reason=r)', "not snake_case"),
        ('log.log(logging.INFO, "x=%s", v)', "not a lowercase phrase"),
        ('logging.warning("stray")', "root logger"),
    ],
)
def test_the_checker_refuses_each_old_form(line, complaint):
    found = violations(line, "m.py")
    assert found and any(complaint in v for v in found), found


def test_the_checker_accepts_the_convention():
    src = (
        'log = get_logger("hwagent.x")\n'
        'log.info("cpu policy started", socket=path, mode=mode, containers=3)\n'
        'self.log.exception("journal undo failed", seq=seq, exc_info=True)\n'
        '(log.error if failed else log.info)("stop requested", reason=reason)\n'
        'log.debug("uevent")\n'
        'task.exception()\n'
        'BUILD_INFO.info({"version": v})\n'
    )
    assert violations(src, "m.py") == []
