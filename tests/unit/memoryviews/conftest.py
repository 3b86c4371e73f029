from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def short_tmp():
    """A short directory: unix socket paths are limited to 107 bytes."""
    d = Path(tempfile.mkdtemp(prefix="hwm-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
