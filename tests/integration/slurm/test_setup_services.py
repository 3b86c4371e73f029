"""scripts/setup.sh test leaves the Slurm peer's packages installed and their services off.

The packages enable munge, slurmd and slurmctld (and start munge) on install; the tests run
their own daemons, so setup stops and disables them. Right after `apt-get install` this
machine said `enabled` for all three; after setup they must be disabled and not running.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SERVICES = ("munge", "slurmd", "slurmctld")
pytestmark = pytest.mark.skipif(shutil.which("systemctl") is None or shutil.which("slurmd") is None,
                                reason="no systemctl or no slurm-wlm (scripts/setup.sh test installs it)")


@pytest.mark.parametrize("service", SERVICES)
def test_peer_service_is_disabled_and_inactive(service):
    if not Path(f"/lib/systemd/system/{service}.service").exists():
        pytest.skip(f"{service}.service not installed")
    enabled = subprocess.run(["systemctl", "is-enabled", service], capture_output=True, text=True).stdout.strip()
    assert enabled == "disabled", f"{service} is {enabled}: run scripts/setup.sh test"
    active = subprocess.run(["systemctl", "is-active", service], capture_output=True, text=True).stdout.strip()
    assert active != "active"


def test_no_system_munged_holds_the_default_socket():
    assert not Path("/run/munge/munge.socket.2").exists()
