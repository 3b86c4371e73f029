"""The runtime's files under the root dir: names that always fit, no link followed, owner-only modes."""

from __future__ import annotations

import os
import stat

import pytest

from agent.cli import main
from agent.runtime.runtime import log_dir
from agent.runtime.state import PodFiles, PodRecord

NAME_MAX = 255


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.parametrize("length", [1, 247, 248, 250, 253])
def test_log_dir_name_fits_a_directory_entry_at_every_admissible_length(tmp_path, length):
    d = log_dir(tmp_path, "default", "a" * length)
    assert d.parent == tmp_path / "logs"
    assert len(os.fsencode(d.name)) <= NAME_MAX
    d.mkdir(parents=True)  # the kernel agrees


def test_log_dir_of_a_short_name_is_unchanged_so_an_old_root_dir_still_finds_its_logs(tmp_path):
    assert log_dir(tmp_path, "ns", "web") == tmp_path / "logs" / "ns_web"


def test_long_names_that_differ_only_after_the_cut_get_different_log_dirs(tmp_path):
    base = "x" * 245
    names = {log_dir(tmp_path, "default", base + suffix).name for suffix in ("a", "b", "aa", "ab", "a.b", "ab.")}
    assert len(names) == 6
    assert all(n.startswith("default_xxxx") for n in names)  # readable prefix kept


def test_logs_cli_finds_the_logs_of_a_253_byte_pod_name(tmp_path, capsys):
    name = ("p" * 62 + ".") * 4 + "q"
    assert len(name) == 253
    d = log_dir(tmp_path, "default", name)
    d.mkdir(parents=True)
    (d / "main.log").write_text("long name\n")
    assert main(["logs", "--root-dir", str(tmp_path), name]) == 0
    assert capsys.readouterr().out == "long name\n"


def test_logs_cli_refuses_a_log_dir_that_is_a_symlink(tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "main.log").write_text("secret\n")
    (tmp_path / "root" / "logs").mkdir(parents=True)
    (tmp_path / "root" / "logs" / "default_web").symlink_to(outside)
    assert main(["logs", "--root-dir", str(tmp_path / "root"), "web"]) == 2
    captured = capsys.readouterr()
    assert "secret" not in captured.out
    assert "symbolic link" in captured.err


def test_pod_state_is_not_written_through_a_planted_pod_dir_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    state = tmp_path / "runtime"
    state.mkdir()
    (state / "u1").symlink_to(outside)
    files = PodFiles(state, "u1")
    with pytest.raises(OSError, match="symbolic link"):
        files.write(PodFiles.encode(PodRecord("u1", "default/a")))
    assert list(outside.iterdir()) == []
    with pytest.raises(OSError, match="symbolic link"):
        files.container("main").prepare()
    assert list(outside.iterdir()) == []


def test_pod_state_is_not_written_through_a_planted_state_root_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "runtime").symlink_to(outside)
    with pytest.raises(OSError, match="symbolic link"):
        PodFiles(tmp_path / "runtime", "u1").write(b"{}")
    assert list(outside.iterdir()) == []


def test_pod_state_is_owner_only_and_looser_dirs_are_tightened(tmp_path):
    state = tmp_path / "runtime"
    (state / "u1").mkdir(parents=True)
    os.chmod(state, 0o755)  # an older hwagent's modes
    os.chmod(state / "u1", 0o755)
    files = PodFiles(state, "u1")
    files.write(PodFiles.encode(PodRecord("u1", "default/a")))
    files.container("main").prepare()
    assert _mode(state) == 0o700
    assert _mode(state / "u1") == 0o700
    assert _mode(state / "u1" / "main") == 0o700
    assert _mode(state / "u1" / "pod.json") == 0o600


def test_start_narrows_an_older_root_dirs_runtime_and_log_dirs(tmp_path):
    from agent.runtime.component import prepare_dirs

    for d in ("runtime/u1/main", "logs/default_web"):
        (tmp_path / d).mkdir(parents=True)
    for d in ("runtime", "runtime/u1", "logs", "logs/default_web"):
        os.chmod(tmp_path / d, 0o755)
    (tmp_path / "logs" / "default_link").symlink_to(tmp_path)  # skipped, never followed
    root_mode = _mode(tmp_path)
    prepare_dirs(tmp_path)
    assert {d: _mode(tmp_path / d) for d in ("runtime", "runtime/u1", "logs", "logs/default_web")} == {
        "runtime": 0o700, "runtime/u1": 0o700, "logs": 0o711, "logs/default_web": 0o700}
    assert _mode(tmp_path) == root_mode and (tmp_path / "logs" / "default_link").is_symlink()


def test_start_refuses_a_runtime_dir_that_is_a_link(tmp_path):
    from agent.runtime.component import prepare_dirs

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "runtime").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RuntimeError, match="symbolic link"):
        prepare_dirs(tmp_path)
