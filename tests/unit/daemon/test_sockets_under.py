"""The daemon's walk for sockets under its root dir (at start, and at stop for the leftovers) reads
the directory listing's own types: a regular file is not stat'ed and no Path is made for it.

With 5,000 pods the root dir holds 5,000 pod records (and with the runtime their logs and
state): the walk was an lstat and a pathlib.Path per file, about 0.1 s of CPU per 1,000 pods on
the way to READY (issue 37 item 17: a restart as an operator feels it).
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from agent.daemon import daemon as d


def _old_walk(root: Path) -> set[Path]:
    """What the walk found before: every non-directory whose lstat says socket."""
    out = set()
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath, name)
            if stat.S_ISSOCK(p.lstat().st_mode):
                out.add(p)
    return out


def _tree(root: Path, files: int = 200) -> list[socket.socket]:
    (root / "workloads" / "pods").mkdir(parents=True)
    for i in range(files):
        (root / "workloads" / "pods" / f"u{i}.json").write_text("{}")
    (root / "deep" / "er").mkdir(parents=True)
    os.mkfifo(root / "deep" / "fifo")
    socks = []
    for path in (root / "cli.sock", root / "deep" / "er" / "plugin.sock"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(path))
        socks.append(s)
    (root / "link.sock").symlink_to(root / "cli.sock")
    (root / "linkdir").symlink_to(root / "deep", target_is_directory=True)
    return socks


def test_the_walk_finds_what_it_found(tmp_path):
    socks = _tree(tmp_path)
    try:
        got = set(d._sockets_under(tmp_path))
        assert got == _old_walk(tmp_path) == {tmp_path / "cli.sock", tmp_path / "deep" / "er" / "plugin.sock"}
    finally:
        for s in socks:
            s.close()


def test_a_regular_file_is_not_stat_ed(tmp_path, monkeypatch):
    socks = _tree(tmp_path, files=500)
    calls = []
    real_stat = os.stat

    def counting_stat(path, *a, **kw):
        calls.append(path)
        return real_stat(path, *a, **kw)

    monkeypatch.setattr(os, "stat", counting_stat)
    monkeypatch.setattr(os, "lstat", lambda path, *a, **kw: counting_stat(path, *a, follow_symlinks=False, **kw))
    try:
        assert len(set(d._sockets_under(tmp_path))) == 2
    finally:
        monkeypatch.undo()
        for s in socks:
            s.close()
    assert len(calls) < 10, f"{len(calls)} stats for 2 sockets among 500 files"


def test_an_unreadable_or_missing_root_is_nothing(tmp_path):
    assert list(d._sockets_under(tmp_path / "absent")) == []
