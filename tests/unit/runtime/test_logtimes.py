"""Log line times: the shim's times file read back, --since and --tail chosen, RFC 3339 shown."""

from __future__ import annotations

import pytest

from agent.runtime.logtimes import (
    RECORD, Line, parse_records, parse_since, rfc3339, select, split_lines, stamped, times_name,
)

S = 1_000_000_000


def test_times_file_names_follow_the_log_and_its_rotations():
    assert times_name("main.log") == "main.times"
    assert times_name("main.log.2") == "main.times.2"


def test_a_line_takes_the_time_of_the_chunk_holding_its_first_byte():
    log = b"a\nb\npartial-" + b"rest\nc\n"
    # chunk 1 at offset 0 ("a\nb\npartial-") at t=10 s, chunk 2 ("rest\nc\n") at t=20 s
    recs = parse_records(RECORD.pack(0, 10 * S) + RECORD.pack(12, 20 * S) + b"\x01\x02")  # torn record ignored
    assert recs == [(0, 10 * S), (12, 20 * S)]
    lines = split_lines(log, recs)
    assert lines == [Line(b"a\n", 10 * S), Line(b"b\n", 10 * S), Line(b"partial-rest\n", 10 * S), Line(b"c\n", 20 * S)]


def test_lines_before_any_record_have_no_time():
    lines = split_lines(b"old\nnew\n", [(4, 5 * S)])
    assert lines == [Line(b"old\n", None), Line(b"new\n", 5 * S)]
    assert stamped(lines[0]) == b"- old\n"


def test_a_slice_of_the_file_keeps_its_offsets():
    assert split_lines(b"x\n", [(0, 1 * S), (100, 2 * S)], base=100) == [Line(b"x\n", 2 * S)]


def test_select_since_then_tail():
    lines = [Line(b"1\n", None), Line(b"2\n", 1 * S), Line(b"3\n", 2 * S), Line(b"4\n", 3 * S)]
    assert [ln.text for ln in select(lines, tail=2)] == [b"3\n", b"4\n"]
    assert [ln.text for ln in select(lines, tail=0)] == []
    assert [ln.text for ln in select(lines, tail=10)] == [b"1\n", b"2\n", b"3\n", b"4\n"]
    assert [ln.text for ln in select(lines, since_ns=2 * S)] == [b"3\n", b"4\n"]
    assert [ln.text for ln in select(lines, tail=1, since_ns=1 * S)] == [b"4\n"]


def test_rfc3339_in_utc_with_nanoseconds():
    assert rfc3339(1_767_225_600 * S + 5) == "2026-01-01T00:00:00.000000005Z"
    assert stamped(Line(b"hi\n", 1_767_225_600 * S)) == b"2026-01-01T00:00:00.000000000Z hi\n"


@pytest.mark.parametrize(("text", "back_s"), [("90s", 90), ("5m", 300), ("1h30m", 5400), ("2d", 172800), ("500ms", 0.5)])
def test_since_durations(text, back_s):
    now = 2_000_000 * S
    assert parse_since(text, now) == now - int(back_s * S)


def test_since_an_rfc3339_time_and_a_bad_value():
    assert parse_since("2026-01-01T00:00:00Z", 0) == 1_767_225_600 * S
    with pytest.raises(ValueError, match="duration .* or an RFC 3339 time"):
        parse_since("yesterday", 0)
    with pytest.raises(ValueError):
        parse_since("", 0)
