"""disk_name: every identity gets one path component that fits, old short names keep theirs, none collide."""

from __future__ import annotations

import itertools

import pytest

from agent.diskname import NAME_MAX, disk_name


def test_plain_short_names_are_unchanged():
    assert disk_name("default", "web") == "default_web"
    assert disk_name("9f1c-uid.1") == "9f1c-uid.1"


@pytest.mark.parametrize("parts", [
    ("default", "a" * 253),
    ("n" * 63, "x" * 253),
    ("default", "\xff" * 200),
    ("default", "é" * 126),
    ("..",),
    (".",),
    (".hidden",),
    ("a/b",),
    ("a\0b",),
    ("a b",),
    ("a%b",),
    ("a~b",),
])
def test_every_name_fits_one_component(parts):
    name = disk_name(*parts)
    raw = name.encode()
    assert 0 < len(raw) <= NAME_MAX
    assert b"/" not in raw and b"\0" not in raw
    assert name not in (".", "..") and not name.startswith(".")
    assert all(32 < b < 127 for b in raw)  # printable ASCII: one line in a log, no terminal escapes


def test_reserve_leaves_room_for_a_suffix():
    assert len(disk_name("u" * 300, reserve=5).encode()) <= NAME_MAX - 5


def test_names_that_differ_only_after_the_cut_or_in_escaped_bytes_do_not_collide():
    base = "x" * 250
    idents = [("default", base + s) for s in ("", "a", "b", "ab", "ba", "a.b")]
    idents += [("default", "a/b"), ("default", "a%2Fb"), ("default", "a~b"), ("a_b", "c"), ("a", "b_c"),
               ("default", "é"), ("default", "%C3%A9"), (".", ""), ("..", "")]
    names = [disk_name(*i) for i in idents]
    assert len(set(names)) == len(names)


def test_a_derived_name_never_equals_a_plain_one():
    plain = disk_name("a", "b")
    derived = [disk_name(*p) for p in itertools.product(["a", "a_", "a/", "."], ["b", "_b", "/b", ""])]
    assert derived.count(plain) == 1  # only ("a", "b") itself


def test_a_long_name_keeps_a_readable_prefix():
    name = disk_name("default", "web-" + "x" * 260)
    assert name.startswith("default_web-xxx") and "~" in name


def test_the_cut_never_leaves_half_an_escape():
    for n in range(200, 260):
        name = disk_name("d", "a" * n + "é" * 20)
        body = name.rsplit("~", 1)[0]
        assert all(len(chunk) >= 2 for chunk in body.split("%")[1:]), name
