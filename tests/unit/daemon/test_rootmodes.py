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
