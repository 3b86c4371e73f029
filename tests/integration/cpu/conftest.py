from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def tmp_path():
    """A short temp dir: unix socket paths must stay under 108 bytes."""
    d = Path(tempfile.mkdtemp(prefix="hwcpu-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
