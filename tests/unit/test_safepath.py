"""safepath: directory chains under a root made and entered without following links, owner-only."""

from __future__ import annotations

import os
import stat

import pytest

from agent.safepath import UnsafePathError, ensure_dir, open_dir, open_file, opened_dir, rel_parts, replace_file


def _mode(p) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_a_chain_is_created_owner_only_whatever_the_umask(tmp_path):
    old = os.umask(0)  # mkdir alone would give 0777
    try:
        d = ensure_dir(tmp_path, "a/b/c", mode=0o700)
    finally:
        os.umask(old)
    assert d == tmp_path / "a" / "b" / "c" and d.is_dir()
    assert [_mode(tmp_path / p) for p in ("a", "a/b", "a/b/c")] == [0o700] * 3


@pytest.mark.parametrize("where", ["a", "a/b", "a/b/c"])
def test_a_link_anywhere_below_the_root_is_refused_and_nothing_is_made_through_it(tmp_path, where):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    parent = (root / where).parent
    parent.mkdir(parents=True, exist_ok=True)
    (root / where).symlink_to(outside)
    with pytest.raises(UnsafePathError, match="symbolic link") as e:
        ensure_dir(root, "a/b/c")
    assert str(root / where) in str(e.value) and "Remove the link;" in str(e.value)
    assert list(outside.iterdir()) == []


def test_a_dangling_link_is_refused_too(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "nowhere")
    with pytest.raises(UnsafePathError, match="symbolic link"):
        ensure_dir(tmp_path, "a/b")
    assert not (tmp_path / "nowhere").exists()


def test_a_file_where_a_directory_belongs_is_refused(tmp_path):
    (tmp_path / "a").write_text("x")
    with pytest.raises(UnsafePathError, match="is not a directory"):
        ensure_dir(tmp_path, "a/b")


def test_the_root_itself_may_be_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "root").symlink_to(tmp_path / "real")
    ensure_dir(tmp_path / "root", "x")
    assert (tmp_path / "real" / "x").is_dir()


def test_looser_existing_dirs_are_narrowed_unless_told_not_to(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    os.chmod(tmp_path / "a", 0o755)
    os.chmod(tmp_path / "a" / "b", 0o750)
    os.close(open_dir(tmp_path, "a/b", tighten=False))
    assert (_mode(tmp_path / "a"), _mode(tmp_path / "a" / "b")) == (0o755, 0o750)
    ensure_dir(tmp_path, "a/b", mode=0o700)
    assert (_mode(tmp_path / "a"), _mode(tmp_path / "a" / "b")) == (0o700, 0o700)


def test_a_missing_chain_is_not_created_without_create(tmp_path):
    with pytest.raises(FileNotFoundError):
        open_dir(tmp_path, "a/b")
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("rel", ["../x", "a/../../x", "/etc"])
def test_paths_that_would_leave_the_root_are_refused(tmp_path, rel):
    with pytest.raises(ValueError, match="leave the root"):
        rel_parts(rel)


def test_files_are_opened_without_following_and_replaced_not_written_through(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("keep")
    d = ensure_dir(tmp_path, "d")
    (d / "f").symlink_to(outside)
    with opened_dir(tmp_path, "d") as dfd:
        with pytest.raises(UnsafePathError, match="symbolic link"):
            open_file(dfd, "f", os.O_RDONLY, where=d, root=tmp_path)
        (d / ".g.tmp").symlink_to(outside)  # a planted temp name is not written through either
        replace_file(dfd, "g", b"new")
        replace_file(dfd, "f", b"new")  # the link itself is replaced
    assert outside.read_text() == "keep"
    assert (d / "f").read_text() == "new" and not (d / "f").is_symlink()
    assert _mode(d / "g") == 0o600
