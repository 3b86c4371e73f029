"""The security tier runs real attacks as real users against a real daemon (root only)."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/security/" in str(item.fspath):
            item.add_marker(pytest.mark.timeout(600))
            if os.geteuid() != 0:
                item.add_marker(pytest.mark.skip(reason="the security tier needs root (useradd, a daemon)"))
