"""agent.statefile: atomic replace, set-aside, canonical checksums, coalescing."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import logging
import os
import random
import stat
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import statefile
from agent.eventlog import get_logger
from agent.statefile import (
    Coalescer,
    canonical_json,
    set_aside,
    sha256_checksum,
    sha256_of,
    write_atomic,
)

# -- write_atomic -------------------------------------------------------------------


def test_write_atomic_replaces_and_leaves_no_temp(tmp_path):
    path = tmp_path / "cp"
    write_atomic(path, b"one")
    write_atomic(path, b"two")
    assert path.read_bytes() == b"two"
    assert sorted(os.listdir(tmp_path)) == ["cp"]
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_write_atomic_mode_and_large_payload(tmp_path):
    path = tmp_path / "big"
    payload = os.urandom(3 << 20)  # more than one write() may take
    write_atomic(str(path), payload, mode=0o640)
    assert path.read_bytes() == payload
    assert os.stat(path).st_mode & 0o777 == 0o640


def test_crash_before_rename_keeps_old_file(tmp_path, monkeypatch):
    """Simulates dying between the fsynced temp file and the rename: the old
    file is untouched and no temp file is left behind."""
    path = tmp_path / "cp"
    write_atomic(path, b"old")

    def crash(src, dst):
        raise OSError(errno.EIO, "simulated crash before rename")

    monkeypatch.setattr(statefile.os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        write_atomic(path, b"new")
    assert path.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["cp"]


def test_failed_fsync_keeps_old_file_and_removes_temp(tmp_path, monkeypatch):
    path = tmp_path / "cp"
    write_atomic(path, b"old")
    real_fsync = os.fsync

    def failing_fsync(fd):
        if stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.ENOSPC, "no space")
        real_fsync(fd)

    monkeypatch.setattr(statefile.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="no space"):
        write_atomic(path, b"new")
    assert path.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["cp"]


def test_write_atomic_fsyncs_file_then_directory_and_uses_cloexec(tmp_path, monkeypatch):
    synced: list[str] = []
    opened: list[int] = []
    real_fsync, real_open = os.fsync, os.open

    def spy_fsync(fd):
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    def spy_open(p, flags, *a, **kw):
        opened.append(flags)
        return real_open(p, flags, *a, **kw)

    monkeypatch.setattr(statefile.os, "fsync", spy_fsync)
    monkeypatch.setattr(statefile.os, "open", spy_open)
    write_atomic(tmp_path / "cp", b"x")
    assert synced == ["file", "dir"]  # data durable before the rename is made durable
    assert opened and all(f & os.O_CLOEXEC for f in opened)


def test_write_atomic_into_missing_directory_fails_cleanly(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "nope" / "cp", b"x")
    assert os.listdir(tmp_path) == []


# -- set_aside ------------------------------------------------------------------------


def _frozen_clock(monkeypatch):
    fixed = time.gmtime(1_800_000_000)
    monkeypatch.setattr(statefile.time, "gmtime", lambda *a: fixed)
    return time.strftime("%Y%m%dT%H%M%SZ", fixed)


def test_set_aside_names_by_utc_time(tmp_path, monkeypatch):
    stamp = _frozen_clock(monkeypatch)
    path = tmp_path / "state.json"
    path.write_bytes(b"bad")
    aside = set_aside(path)
    assert aside == tmp_path / f"state.json.corrupt-{stamp}"
    assert aside.read_bytes() == b"bad" and not path.exists()
    path.write_bytes(b"old")
    assert set_aside(path, suffix="stale").name == f"state.json.stale-{stamp}"


@pytest.mark.parametrize("hardlinks", [True, False], ids=["link", "rename-fallback"])
def test_set_aside_never_overwrites(tmp_path, monkeypatch, hardlinks):
    stamp = _frozen_clock(monkeypatch)  # every call lands in the same second
    if not hardlinks:
        def no_link(*a, **kw):
            raise OSError(errno.EPERM, "filesystem without hard links")

        monkeypatch.setattr(statefile.os, "link", no_link)
    path = tmp_path / "cp"
    # a file already holding the first and third candidate names (e.g. from an earlier run)
    (tmp_path / f"cp.corrupt-{stamp}").write_bytes(b"evidence-0")
    (tmp_path / f"cp.corrupt-{stamp}~2").write_bytes(b"evidence-2")
    names = []
    for i in range(3):
        path.write_bytes(f"bad-{i}".encode())
        names.append(set_aside(path).name)
    assert names == [f"cp.corrupt-{stamp}~1", f"cp.corrupt-{stamp}~3", f"cp.corrupt-{stamp}~4"]
    assert (tmp_path / f"cp.corrupt-{stamp}").read_bytes() == b"evidence-0"
    assert (tmp_path / f"cp.corrupt-{stamp}~2").read_bytes() == b"evidence-2"
    assert [(tmp_path / n).read_bytes() for n in names] == [b"bad-0", b"bad-1", b"bad-2"]
    assert not path.exists()


def test_set_aside_of_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        set_aside(tmp_path / "absent")
    assert os.listdir(tmp_path) == []


# -- canonical JSON and checksums ----------------------------------------------------------


def test_canonical_json_ignores_key_order_and_whitespace():
    a = {"b": [1, {"y": 2, "x": 1}], "a": None}
    b = {"a": None, "b": [1, {"x": 1, "y": 2}]}
    assert canonical_json(a) == canonical_json(b) == b'{"a":null,"b":[1,{"x":1,"y":2}]}'


def test_canonical_json_ascii_choice_is_explicit():
    assert canonical_json({"k": "é"}) == '{"k":"é"}'.encode()
    assert canonical_json({"k": "é"}, ensure_ascii=True) == b'{"k":"\\u00e9"}'
    assert sha256_checksum({"k": "é"}) != sha256_checksum({"k": "é"}, ensure_ascii=True)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_json, st.booleans())
def test_canonical_json_is_sorted_compact_dumps(obj, ascii_only):
    """The cached encoder gives exactly what the formats were defined with."""
    want = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii_only)
    assert canonical_json(obj, ensure_ascii=ascii_only) == want.encode()
    assert json.loads(canonical_json(obj, ensure_ascii=ascii_only)) == obj


def test_sha256_checksum_format():
    obj = {"z": 1, "a": [True, "s"]}
    c = sha256_checksum(obj)
    assert c == "sha256:" + hashlib.sha256(b'{"a":[true,"s"],"z":1}').hexdigest()
    assert c == sha256_of(canonical_json(obj))
    assert sha256_checksum({"z": 2, "a": [True, "s"]}) != c


# -- Coalescer ----------------------------------------------------------------------------


def test_burst_of_flushes_costs_two_writes():
    """One write in flight, 50 flushes arrive: they all ride on ONE more write."""
    gate = threading.Event()
    started = threading.Event()
    writes: list[int] = []

    def work(v):
        started.set()
        gate.wait(5)
        writes.append(v)

    state = {"v": 0}

    async def main():
        co = Coalescer(work, "t", snapshot=lambda: state["v"])
        first = asyncio.ensure_future(co.flush())
        while not started.is_set():
            await asyncio.sleep(0.001)
        state["v"] = 50
        rest = [asyncio.ensure_future(co.flush()) for _ in range(50)]
        await asyncio.sleep(0.01)
        assert not any(f.done() for f in rest)  # none may return on the write begun before them
        gate.set()
        await asyncio.gather(first, *rest)
        return co.runs

    assert asyncio.run(main()) == 2
    assert writes == [0, 50]


def test_each_flush_returns_only_after_its_change_is_written():
    """Random interleavings: when flush() returns, a write that began after the
    caller's change has finished, so the change is on 'disk'."""
    disk: list[int] = []
    state = {"v": 0}

    def work(v):
        time.sleep(random.random() / 1000)
        disk.append(v)

    async def caller(co):
        for _ in range(5):
            await asyncio.sleep(random.random() / 500)
            state["v"] += 1
            mine = state["v"]
            await co.flush()
            assert disk and max(disk) >= mine

    async def main():
        co = Coalescer(work, "t", snapshot=lambda: state["v"])
        await asyncio.gather(*(caller(co) for _ in range(20)))
        return co.runs

    random.seed(7)
    runs = asyncio.run(main())
    assert runs < 100  # 100 flushes, coalesced
    assert disk == sorted(disk) and disk[-1] == 100  # one writer at a time, the newest state last


def test_submit_value_and_wait():
    got: list[str] = []

    async def main():
        co: Coalescer[str] = Coalescer(got.append, "t")
        await co.wait()  # nothing pending: returns at once, no run
        assert co.runs == 0
        co.submit("a")
        co.submit("b")
        await co.wait()
        await co.wait()
        co.completed_elsewhere()  # written synchronously by the caller
        await co.wait()

    asyncio.run(main())
    assert got[-1] == "b" and len(got) <= 2


def test_failure_reaches_waiters_is_logged_and_retried(caplog):
    calls: list[str] = []

    def work(v):
        calls.append(v)
        if len(calls) == 1:
            raise OSError("disk full")

    async def main():
        co: Coalescer[str] = Coalescer(work, "thing_write", logger=get_logger("hwagent.test"))
        co.submit("x")
        with pytest.raises(OSError, match="disk full"):
            await co.wait()
        assert co.done < co.gen  # not marked written
        await co.wait()  # retried
        assert co.done == co.gen

    with caplog.at_level(logging.ERROR, logger="hwagent.test"):
        asyncio.run(main())
    assert calls == ["x", "x"]
    assert any(r.name == "hwagent.test" and r.getMessage() == "coalesced work failed" and r.fields["work"] == "thing_write"
               for r in caplog.records)


def test_cancelled_waiter_does_not_cancel_the_write():
    gate = threading.Event()
    written: list[int] = []

    def work(v):
        gate.wait(5)
        written.append(v)

    async def main():
        co = Coalescer(work, "t")
        co.submit(1)
        waiter = asyncio.ensure_future(co.wait())
        await asyncio.sleep(0.01)
        waiter.cancel()
        gate.set()
        await co.drain()

    asyncio.run(main())
    assert written == [1]
