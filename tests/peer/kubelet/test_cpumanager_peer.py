"""Optional tier: hwagent's reading of the kubelet's CPU manager against files the kubelet's own code writes.

``cpumstate`` (tests/peer/kubelet/build.sh: Kubernetes 1.32's cpumanager/state checkpoint and
KubeletConfiguration, from kubeedge's vendored tree) writes a kubelet root dir for a policy; the
conflict hwagent decides from it must match the policy, and the kubelet's own refusal to start
with another policy than its checkpoint's (why hwagent's fix says to remove the file) is checked.

Skips with the reason when the binary is absent (CI has no fetched Go tree): set
HWAGENT_CPUMSTATE to it, or build it to the default /tmp/hwagent-kubelet-peer/cpumstate.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.kubelet.cpumanager import check, read

CPUMSTATE = Path(os.environ.get("HWAGENT_CPUMSTATE", "/tmp/hwagent-kubelet-peer/cpumstate"))

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not os.access(CPUMSTATE, os.X_OK),
                       reason=f"no cpumstate binary at {CPUMSTATE} (build it with tests/peer/kubelet/build.sh "
                              "KUBEEDGE_GIT_DIR GO, or set HWAGENT_CPUMSTATE)"),
]


def _kubelet_root(root: Path, policy: str) -> dict[str, str]:
    root.mkdir()
    run = subprocess.run([str(CPUMSTATE), str(root), policy], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


def test_a_static_kubelet_is_a_conflict_and_a_none_kubelet_is_not(tmp_path: Path) -> None:
    static = _kubelet_root(tmp_path / "static", "static")
    none = _kubelet_root(tmp_path / "none", "none")

    found = read(tmp_path / "static")
    assert (found.state_policy, found.config_policy, found.errors) == ("static", "static", ())
    v = check(tmp_path / "static")
    assert v.conflict and v.certain and "refused" in v.detail
    assert str(tmp_path / "static" / "cpu_manager_state") in v.fix

    v = check(tmp_path / "none")
    assert not v.conflict and v.certain
    assert read(tmp_path / "none").state_policy == "none"

    # the kubelet will not start on a checkpoint of another policy: the fix's "remove the file" is needed
    assert 'differs from state checkpoint policy "static"' in static["refusal"]
    assert 'differs from state checkpoint policy "none"' in none["refusal"]


def test_a_config_turned_static_under_a_none_checkpoint_is_a_conflict(tmp_path: Path) -> None:
    _kubelet_root(tmp_path / "static", "static")
    _kubelet_root(tmp_path / "none", "none")
    shutil.copy(tmp_path / "static" / "config.yaml", tmp_path / "none" / "config.yaml")
    v = check(tmp_path / "none")
    assert v.conflict and "cpuManagerPolicy=static" in v.detail
