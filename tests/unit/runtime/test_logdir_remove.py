"""Removing and measuring a pod's log directory (agent.runtime.logdir, issue 32 item 6): the
directory is its user's, so a link in it is removed as a name and never followed, a hard link
loses only its name, and another user's directory moved in is left alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.runtime.logdir import LOGS, MAX_DEPTH, LogDirs, log_dir, log_dir_bytes, prepare_log_file, remove_log_dir


def _pod_dir(root: Path, name: str = "p") -> Path:
    prepare_log_file(root, "default", name, "main")
    d = log_dir(root, "default", name)
    (d / "main.log").write_bytes(b"x" * 100)
    (d / "main.log.1").write_bytes(b"y" * 50)
    (d / "main.times").write_bytes(b"z" * 16)
    return d


def test_remove_takes_the_files_and_the_directory(tmp_path):
    d = _pod_dir(tmp_path)
    assert log_dir_bytes(tmp_path, "default", "p") == 166
    assert remove_log_dir(tmp_path, "default", "p") is True
    assert not os.path.lexists(d)
    assert log_dir_bytes(tmp_path, "default", "p") == 0
    assert remove_log_dir(tmp_path, "default", "p") is False  # nothing there: not an error
    assert remove_log_dir(tmp_path / "nowhere", "default", "p") is False


def test_links_are_names_only(tmp_path):
    d = _pod_dir(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "precious"
    target.write_text("keep\n")
    (outside / "inside").write_text("keep too\n")
    os.symlink(target, d / "sym.log")
    os.symlink(outside, d / "dirlink")
    os.link(target, d / "hard.log")
    (d / "sub").mkdir()
    os.symlink(outside, d / "sub" / "deeper")
    # a link is not counted as the bytes of what it points at (the hard link's bytes are the pod dir's)
    assert log_dir_bytes(tmp_path, "default", "p") == 166 + 5
    assert remove_log_dir(tmp_path, "default", "p")
    assert not os.path.lexists(d)
    assert target.read_text() == "keep\n" and os.stat(target).st_nlink == 1
    assert sorted(os.listdir(outside)) == ["inside", "precious"]


def test_a_link_in_place_of_the_directory_is_removed_as_a_name(tmp_path):
    (tmp_path / LOGS).mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "main.log").write_text("not the pod's\n")
    os.symlink(elsewhere, log_dir(tmp_path, "default", "p"))
    assert log_dir_bytes(tmp_path, "default", "p") == 0
    assert remove_log_dir(tmp_path, "default", "p")
    assert not os.path.lexists(log_dir(tmp_path, "default", "p"))
    assert (elsewhere / "main.log").read_text() == "not the pod's\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_another_users_directory_inside_is_left_and_said(tmp_path):
    d = _pod_dir(tmp_path)
    theirs = d / "theirs"
    theirs.mkdir()
    (theirs / "file").write_text("theirs\n")
    os.chown(theirs, 4242, 4242)
    with pytest.raises(FileExistsError) as e:
        remove_log_dir(tmp_path, "default", "p")
    assert str(d) in str(e.value)
    assert (theirs / "file").read_text() == "theirs\n"
    assert sorted(os.listdir(d)) == ["theirs"]  # the pod's own files went


def test_depth_is_bounded(tmp_path):
    d = _pod_dir(tmp_path)
    deep = d
    for i in range(MAX_DEPTH + 2):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    with pytest.raises(FileExistsError):
        remove_log_dir(tmp_path, "default", "p")
    assert not (d / "main.log").exists()


def test_orphans_are_those_no_record_names(tmp_path):
    _pod_dir(tmp_path, "kept")
    _pod_dir(tmp_path, "gone")
    dirs = LogDirs(tmp_path)
    assert dirs.remove_orphans({"default_kept"}) == ["default_gone"]
    assert sorted(os.listdir(tmp_path / LOGS)) == ["default_kept"]
    assert dirs.exists("default", "kept") and not dirs.exists("default", "gone")
