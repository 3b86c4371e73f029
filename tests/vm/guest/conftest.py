"""Fixtures of the guest side: which topology and cgroup layout this guest was booted with,
and the gate that ends a guest whose gate test failed for a timeout (tests/vm/gate.py)."""

from __future__ import annotations

import os

import pytest

from tests.vm import gate
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


def pytest_configure(config):
    config.addinivalue_line("markers", f"{gate.MARKER}: a guest test the ones after it need; failing for a "
                            "timeout, it ends the guest's session (tests/vm/gate.py)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A gate test that failed for a timeout stops the session with the reason (tests/vm/gate.py)."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or call.excinfo is None or item.get_closest_marker(gate.MARKER) is None:
        return
    if gate.is_timeout(call.excinfo.value):
        items = item.session.items
        item.session.shouldstop = gate.stop_reason(item.nodeid, call.excinfo.value, len(items) - items.index(item) - 1)
