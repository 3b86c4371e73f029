"""The daemon's directories under the root dir: a planted link is refused, never followed."""

from __future__ import annotations

import os
import stat

import pytest

from agent.contracts import DaemonContext
from agent.daemon.daemon import ROOT_LAYOUT, DaemonError, prepare_root


@pytest.mark.parametrize("where", ROOT_LAYOUT)
def test_prepare_root_refuses_a_layout_dir_that_is_a_planted_link(tmp_path, where):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / where).symlink_to(outside)
    with pytest.raises(DaemonError, match="symbolic link"):
        prepare_root(root)
    assert list(outside.iterdir()) == []


def test_context_path_refuses_a_planted_link_under_the_root(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "pressure").symlink_to(outside)
    ctx = DaemonContext(config=None, root_dir=tmp_path, topology=None)  # type: ignore[arg-type]
    with pytest.raises(OSError, match="symbolic link"):
        ctx.path("pressure", "evictions.jsonl")
    assert list(outside.iterdir()) == []
    assert ctx.path("fresh", "x") == tmp_path / "fresh" / "x"
    assert (tmp_path / "fresh").is_dir() and stat.S_IMODE(os.lstat(tmp_path / "fresh").st_mode) == 0o700
