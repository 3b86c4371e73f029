"""Log lines: one logfmt record per line, journald priorities when stderr is the journal."""

from __future__ import annotations

import io
import logging
import os
import re

import pytest

from agent.daemon.logs import LogfmtFormatter, logfmt_value, setup_logging, stream_is_journald
from agent.eventlog import FIELDS_ATTR, get_logger


def _record(msg="hello", level=logging.INFO, exc=None, **fields):
    logger = logging.getLogger("hwagent.test")
    return logger.makeRecord("hwagent.test", level, __file__, 1, msg, (), exc, extra={FIELDS_ATTR: fields})


@pytest.mark.parametrize(
    "value, expected",
    [
        ("plain", "plain"),
        ("two words", '"two words"'),
        ('say "hi"', r'"say \"hi\""'),
        ("a=b", '"a=b"'),
        ("line1\nline2", r'"line1\nline2"'),
        ("back\\slash", r'"back\\slash"'),
        ("bell\x07", r'"bell\x07"'),
        ("", '""'),
        (True, "true"),
        (3, "3"),
    ],
)
def test_logfmt_value(value, expected):
    assert logfmt_value(value) == expected


def _parse_logfmt(line: str) -> dict[str, str]:
    """A tiny logfmt reader, so the test checks that lines read back, not how they look."""
    out = {}
    for m in re.finditer(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)', line):
        v = m.group(2)
        if v.startswith('"'):
            v = v[1:-1].encode().decode("unicode_escape")
        out[m.group(1)] = v
    return out


def test_record_reads_back_with_fields():
    line = LogfmtFormatter().format(_record("component started", component="cpu policy", seconds="0.010"))
    assert "\n" not in line
    kv = _parse_logfmt(line)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", kv["ts"])
    assert kv["level"] == "info" and kv["logger"] == "hwagent.test"
    assert kv["msg"] == "component started"
    assert kv["component"] == "cpu policy" and kv["seconds"] == "0.010"


def test_traceback_is_folded_into_one_line():
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        import sys

        rec = _record("failed", logging.ERROR, exc=sys.exc_info())
    line = LogfmtFormatter().format(rec)
    assert "\n" not in line
    kv = _parse_logfmt(line)
    assert "Traceback" in kv["exc"] and "ValueError: boom\nsecond line" in kv["exc"]


@pytest.mark.parametrize(
    "level, prio", [(logging.DEBUG, 7), (logging.INFO, 6), (logging.WARNING, 4), (logging.ERROR, 3), (logging.CRITICAL, 2)]
)
def test_journald_lines_carry_priority_and_no_timestamp(level, prio):
    line = LogfmtFormatter(journald=True).format(_record(level=level))
    assert line.startswith(f"<{prio}>level=")
    assert "ts=" not in line


def test_stream_is_journald_matches_device_and_inode(tmp_path):
    with open(tmp_path / "f", "w") as stream:
        st = os.fstat(stream.fileno())
        assert stream_is_journald(stream, {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
        # inherited variable, different stream: not the journal
        assert not stream_is_journald(stream, {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino + 1}"})
        assert not stream_is_journald(stream, {"JOURNAL_STREAM": "garbage"})
        assert not stream_is_journald(stream, {})
    assert not stream_is_journald(io.StringIO(), {"JOURNAL_STREAM": "1:2"})


def test_setup_logging_levels():
    buf = io.StringIO()
    handler = setup_logging("warning", stream=buf, journald=False)
    try:
        get_logger("hwagent.x").info("hidden")
        get_logger("hwagent.x").warning("shown", k="v")
        logging.getLogger("some.library").info("library chatter")
        logging.getLogger("some.library").error("library error")
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger("hwagent").setLevel(logging.NOTSET)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert 'msg=shown k=v' in lines[0]
    assert "logger=some.library" in lines[1]


def test_setup_logging_replaces_its_own_handler():
    a = setup_logging("info", stream=io.StringIO(), journald=False)
    b = setup_logging("info", stream=io.StringIO(), journald=False)
    try:
        root = logging.getLogger()
        assert b in root.handlers and a not in root.handlers
    finally:
        logging.getLogger().removeHandler(b)
        logging.getLogger("hwagent").setLevel(logging.NOTSET)


def _lines(emit) -> list[str]:
    buf = io.StringIO()
    handler = setup_logging("debug", stream=buf, journald=False)
    try:
        emit()
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger("hwagent").setLevel(logging.NOTSET)
    return buf.getvalue().splitlines()


def test_keyword_fields_become_pairs_in_call_order():
    log = get_logger("hwagent.test.fields")
    (line,) = _lines(lambda: log.warning("device health", kind="block", key="7:0", reason="1 errors in 60s",
                                         healthy=False, name="nvme0n1", errors=3))
    assert line.endswith('logger=hwagent.test.fields msg="device health" kind=block key=7:0 '
                         'reason="1 errors in 60s" healthy=false name=nvme0n1 errors=3')
    kv = _parse_logfmt(line)
    assert kv["level"] == "warning" and kv["msg"] == "device health"


def test_fields_never_touch_the_record_or_the_fixed_fields(caplog):
    # "name" and "module" are LogRecord attributes: as fields they must neither clash nor overwrite
    log = get_logger("hwagent.test.clash")
    with caplog.at_level(logging.INFO, logger="hwagent.test.clash"):
        log.info("probe", name="runqlat", module="bpf", logger="9", exc="x")
    (r,) = caplog.records
    assert r.name == "hwagent.test.clash" and r.module == "test_logging" and r.levelname == "INFO"
    assert r.fields == {"name": "runqlat", "module": "bpf", "logger": "9", "exc": "x"}
    line = LogfmtFormatter().format(r)
    kv = _parse_logfmt(line)
    assert kv["level"] == "info" and kv["msg"] == "probe" and kv["name"] == "runqlat"
    assert kv["logger"] == "hwagent.test.clash" and kv["logger_"] == "9" and kv["exc_"] == "x" and "exc" not in kv


def test_logging_keywords_keep_their_meaning(caplog):
    log = get_logger("hwagent.test.kw")

    def helper():
        log.info("from the caller", stacklevel=2, pod="p")

    with caplog.at_level(logging.INFO, logger="hwagent.test.kw"):
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("handler failed", method="Get")
        log.error("with stack", stack_info=True)
        helper()
    failed, stacked, called = caplog.records
    assert failed.exc_info and failed.exc_info[0] is ValueError and failed.fields == {"method": "Get"}
    # the caller is the module that logged, not the adapter in agent/eventlog.py
    assert failed.funcName == "test_logging_keywords_keep_their_meaning" and failed.pathname == __file__
    assert stacked.stack_info and not hasattr(stacked, "fields")
    assert called.funcName == "test_logging_keywords_keep_their_meaning" and called.fields == {"pod": "p"}
    line = LogfmtFormatter().format(failed)
    assert 'msg="handler failed" method=Get exc="Traceback' in line


def test_a_message_is_never_parsed():
    # a library's (or a stray) "event key=value" message stays one msg value: no fields are guessed from it
    (line,) = _lines(lambda: logging.getLogger("hwagent.test.raw").warning("probe name=%s mode=%s", "runqlat", "bpf"))
    assert line.endswith('msg="probe name=runqlat mode=bpf"')
