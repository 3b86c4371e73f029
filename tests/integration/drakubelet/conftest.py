from pathlib import Path

import pytest


@pytest.fixture
def tmp_path(short_tmp_path: Path) -> Path:
    """These tests bind the kubelet's socket tree under tmp_path: a short one (tests/conftest.py)."""
    return short_tmp_path
