"""The tests' data lives in the repository: a clone alone passes its suite.

The hwloc snapshots once lived in a ``shared`` directory beside the checkout,
so a fresh clone failed every test that read one. These checks keep it that
way: the snapshot directory is inside the repository and complete, and no
file under ``tests/`` reaches outside for data again.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import HWLOC_DIR, REPO, hwloc_snapshot_names

TESTS = REPO / "tests"

#: ways a test could name the old location: the relative path, the directory
#: beside the checkout, or the variable that pointed at it
_OUTSIDE = re.compile(r"\.\./shared\b|\.parent\s*/\s*[\"']shared[\"']|HWAGENT_" + "SHARED")
_TEXT_SUFFIXES = {".py", ".sh", ".md", ".toml", ".cfg", ".ini", ".txt", ".json", ".yaml", ".yml"}


def test_snapshots_are_inside_the_repository() -> None:
    assert HWLOC_DIR.resolve().is_relative_to(REPO.resolve()), f"{HWLOC_DIR} is outside {REPO}"
    assert len(hwloc_snapshot_names()) >= 30, f"hwloc snapshots missing under {HWLOC_DIR}"


def test_every_snapshot_has_its_test_and_hwloc_reading() -> None:
    for name in hwloc_snapshot_names():
        assert (HWLOC_DIR / f"{name}.test").is_file(), f"{name}: no .test beside the tarball"
        targets = [HWLOC_DIR / f"{name}{ext}" for ext in (".console", ".xml")]
        assert any(t.is_file() for t in targets), f"{name}: no stored lstopo output (.console or .xml)"
    assert (HWLOC_DIR / "COPYING.hwloc").is_file(), "hwloc's licence must travel with its snapshots"


def test_no_test_file_reads_data_from_beside_the_checkout() -> None:
    me = Path(__file__).resolve()
    offenders = []
    for path in sorted(TESTS.rglob("*")):
        if path.suffix not in _TEXT_SUFFIXES or not path.is_file() or path.resolve() == me:
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if _OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not offenders, "test data must come from tests/fixtures, not ../shared:\n" + "\n".join(offenders)
