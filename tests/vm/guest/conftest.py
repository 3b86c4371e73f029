"""Fixtures of the guest side: which topology and cgroup layout this guest was booted with."""

from __future__ import annotations

import os

import pytest

from tests.vm.topologies import TOPOLOGIES, GuestTopology


@pytest.fixture(scope="session")
def topo() -> GuestTopology:
    """The spec qemu was started from (runner.py passes its name)."""
    return TOPOLOGIES[os.environ["HWAGENT_VM_TOPOLOGY"]]


@pytest.fixture(scope="session")
def cgroup_layout() -> str:
    return os.environ["HWAGENT_VM_CGROUP"]


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.vm)
