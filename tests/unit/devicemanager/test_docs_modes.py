"""docs/devicemanager.md states the modes the code really gives its directories."""

from __future__ import annotations

import re
import stat
from pathlib import Path

from agent.daemon.daemon import SUBDIR_MODE, prepare_root
from agent.unixsock import ensure_private_dir

DOC = Path(__file__).resolve().parents[3] / "docs" / "devicemanager.md"


def test_directory_modes_in_the_doc_match_the_code(tmp_path):
    text = DOC.read_text()
    layout = re.search(r"root layout's directories[^.]*?\b(0[0-7]{3})\b", text)
    own = re.search(r"creates itself[^.]*?\b(0[0-7]{3})\b", text)
    assert layout and own, "docs/devicemanager.md must state both directory modes"
    prepare_root(tmp_path / "root")
    real_layout = stat.S_IMODE((tmp_path / "root" / "device-plugins").stat().st_mode)
    assert real_layout == SUBDIR_MODE and layout.group(1) == f"0{real_layout:o}"
    ensure_private_dir(tmp_path / "elsewhere")
    assert own.group(1) == f"0{stat.S_IMODE((tmp_path / 'elsewhere').stat().st_mode):o}"
    assert "are 0700; existing" not in text
