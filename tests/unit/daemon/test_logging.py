"""Log lines: one logfmt record per line, journald priorities when stderr is the journal."""

from __future__ import annotations

import io
import logging
import os
import re

import pytest

from agent.daemon.logs import LogfmtFormatter, logfmt_value, setup_logging, stream_is_journald


def _record(msg="hello", level=logging.INFO, exc=None, **extra):
    logger = logging.getLogger("hwagent.test")
    return logger.makeRecord("hwagent.test", level, __file__, 1, msg, (), exc, extra=extra)


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


def test_record_reads_back_with_extras():
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
        logging.getLogger("hwagent.x").info("hidden")
        logging.getLogger("hwagent.x").warning("shown", extra={"k": "v"})
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


@pytest.mark.parametrize(
    "message, expected",
    [
        ("started", ("started", [])),
        ("probe name=runqlat mode=bpf", ("probe", [("name", "runqlat"), ("mode", "bpf")])),
        # %r-formatted values (Python string reprs), escapes included
        ("register_failed details='no such file' retry_in_s=0.20",
         ("register_failed", [("details", "no such file"), ("retry_in_s", "0.20")])),
        ("x reason=\"it's\" other='a\\'b'", ("x", [("reason", "it's"), ("other", "a'b")])),
        ("empty value=", ("empty", [("value", "")])),
        # free text anywhere: not the convention, logged whole
        ("plugin_socket_gone resource=x (serving again)", None),
        ("hwagent ready", None),
        ("key=value", None),
        ("bad quote='unterminated", None),
        ("", None),
    ],
)
def test_split_event(message, expected):
    from agent.daemon.logs import split_event

    assert split_event(message) == expected


def test_event_messages_become_fields():
    record = logging.makeLogRecord({
        "name": "hwagent.pressure", "levelno": logging.WARNING, "levelname": "WARNING",
        "msg": "device_health kind=%s key=%s reason=%r", "args": ("block", "7:0", "1 errors in 60s"),
    })
    line = LogfmtFormatter().format(record)
    kv = _parse_logfmt(line)
    assert kv["msg"] == "device_health"
    assert (kv["kind"], kv["key"], kv["reason"]) == ("block", "7:0", "1 errors in 60s")
    assert line.endswith('msg=device_health kind=block key=7:0 reason="1 errors in 60s"')


def test_event_pairs_never_shadow_fixed_or_extra_fields():
    # a pair named like a fixed field, or like an extra, keeps the whole message in msg
    for msg, extra in (("ev level=9", {}), ("ev component=a", {"component": "b"})):
        line = LogfmtFormatter().format(_record(msg, **extra))
        kv = _parse_logfmt(line)
        assert kv["msg"] == msg and kv["level"] == "info"
