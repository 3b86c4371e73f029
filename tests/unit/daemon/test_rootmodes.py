"""Root's state under the root dir is closed to others at every start, a root dir an earlier
version made included (issue 32 item 7): modes only narrow, links are not followed, and what
users reach (logs/, the sockets, the pid file) keeps its mode."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from agent.daemon.rootmodes import ROOT_MODE, tighten_root, tightened


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_tightened_only_drops_bits():
    assert tightened(0o755, 0o711) == 0o711
    assert tightened(0o700, 0o711) == 0o700  # an operator's stricter choice stays
    assert tightened(0o644, 0o600) == 0o600
    assert tightened(0o400, 0o600) == 0o400


def test_an_earlier_versions_root_dir_is_narrowed_and_users_paths_keep_theirs(tmp_path):
    root = tmp_path / "root"
    for d in ("advisor", "dra", "pressure", "logs/default_x", "device-plugins"):
        (root / d).mkdir(parents=True)
    os.chmod(root, 0o755)
    os.chmod(root / "advisor", 0o755)
    os.chmod(root / "dra", 0o755)
    os.chmod(root / "logs", 0o711)
    for f, m in (("advisor/decisions.jsonl", 0o644), ("advisor/decisions.jsonl.1", 0o644),
                 ("dra/disk.yaml", 0o644), ("pressure/evictions.jsonl", 0o640), ("hwagent.pid", 0o644),
                 ("logs/default_x/main.log", 0o600)):
        (root / f).write_text("x")
        os.chmod(root / f, m)
    outside = tmp_path / "outside"
    outside.write_text("not ours")
    os.chmod(outside, 0o644)
    (root / "dra" / "link.yaml").symlink_to(outside)
    changed = tighten_root(root)
    assert _mode(root) == ROOT_MODE == 0o711
    assert (_mode(root / "advisor"), _mode(root / "dra")) == (0o700, 0o700)
    for f in ("advisor/decisions.jsonl", "advisor/decisions.jsonl.1", "dra/disk.yaml", "pressure/evictions.jsonl"):
        assert _mode(root / f) == 0o600, f
    assert _mode(root / "hwagent.pid") == 0o644 and _mode(root / "logs") == 0o711
    assert _mode(outside) == 0o644  # the link was not followed
    assert len(changed) == 8 and any("advisor/decisions.jsonl 0o644->0o600" in c for c in changed), changed
    assert tighten_root(root) == []  # a second start changes nothing


def test_a_stricter_root_and_absent_dirs_are_left_alone(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    os.chmod(root, 0o700)
    assert tighten_root(root) == [] and _mode(root) == 0o700


def test_deep_dirs_special_bits_and_a_linked_dir_under_roots_state(tmp_path):
    """The per-entry pass (one lstat per entry, issue 37 item 17) still reaches nested directories,
    drops setuid/setgid/sticky bits of a file already 0600, and does not enter a linked directory."""
    root = tmp_path / "root"
    deep = root / "workloads" / "a" / "b"
    deep.mkdir(parents=True)
    os.chmod(root / "workloads" / "a", 0o755)
    (deep / "rec.json").write_text("x")
    os.chmod(deep / "rec.json", 0o4600)
    (deep / "ok.json").write_text("x")
    os.chmod(deep / "ok.json", 0o600)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "f").write_text("x")
    os.chmod(elsewhere / "f", 0o644)
    (root / "workloads" / "linked").symlink_to(elsewhere, target_is_directory=True)
    changed = tighten_root(root)
    assert _mode(root / "workloads" / "a") == 0o700
    assert (_mode(deep / "rec.json"), _mode(deep / "ok.json")) == (0o600, 0o600)
    assert (_mode(elsewhere / "f"), _mode(elsewhere)) == (0o644, 0o755)  # the link was not entered
    assert any(c.endswith("rec.json 0o4600->0o600") for c in changed) and not any("ok.json" in c for c in changed)
    assert tighten_root(root) == []
