import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def sockdir():
    """A short directory (unix socket paths are limited to 107 bytes)."""
    d = Path(tempfile.mkdtemp(prefix="dm-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
