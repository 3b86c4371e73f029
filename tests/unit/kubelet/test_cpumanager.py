"""The kubelet's CPU manager against hwagent's NRI placement: read from fixture kubelet roots, decided purely."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.kubelet.cpumanager import KubeletCpuManager, check, decide, read

#: the kubelet's checkpoints as it writes them (cpumanager/state, checkpoint v2)
STATIC_STATE = {"policyName": "static", "defaultCpuSet": "0,3-7", "entries": {"uid-1": {"main": "1-2"}},
                "checksum": 1353318690}
NONE_STATE = {"policyName": "none", "defaultCpuSet": "", "checksum": 1966990140}


def _root(tmp_path: Path, state: object | None = None, config: str | None = None) -> Path:
    if state is not None:
        (tmp_path / "cpu_manager_state").write_text(state if isinstance(state, str) else json.dumps(state))
    if config is not None:
        (tmp_path / "config.yaml").write_text(config)
    return tmp_path


def test_no_kubelet_is_no_conflict(tmp_path: Path) -> None:
    v = check(tmp_path)
    assert (v.conflict, v.certain) == (False, True) and "no kubelet state" in v.detail


def test_a_static_checkpoint_is_a_conflict_with_the_fix(tmp_path: Path) -> None:
    v = check(_root(tmp_path, STATIC_STATE, "kind: KubeletConfiguration\ncpuManagerPolicy: static\n"))
    assert v.conflict and "static" in v.detail and "refused" in v.detail
    assert "cpuManagerPolicy: none" in v.fix and str(tmp_path / "cpu_manager_state") in v.fix


def test_none_everywhere_is_no_conflict(tmp_path: Path) -> None:
    v = check(_root(tmp_path, NONE_STATE, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"))
    assert not v.conflict and v.certain and "none" in v.detail


def test_a_config_turned_static_before_the_kubelet_restarted_is_a_conflict_already(tmp_path: Path) -> None:
    """The next kubelet start enforces it (after the checkpoint is removed): refuse before it does."""
    v = check(_root(tmp_path, NONE_STATE, "cpuManagerPolicy: static\n"))
    assert v.conflict and "cpuManagerPolicy=static" in v.detail


def test_a_config_at_another_path_is_read(tmp_path: Path) -> None:
    other = tmp_path / "etc-kubelet.yaml"
    other.write_text('{"cpuManagerPolicy": "static"}')  # JSON is YAML too, as the kubelet accepts it
    assert read(tmp_path, other).config_policy == "static" and check(tmp_path, other).conflict


@pytest.mark.parametrize(("state", "config"), [
    ("{not json", None), (json.dumps({"defaultCpuSet": ""}), None), (json.dumps(["static"]), None),
    (None, "cpuManagerPolicy: [static]\n"), (None, "a: b: c:\n"),
])
def test_an_unreadable_file_decides_nothing_and_says_so(tmp_path: Path, state: str | None, config: str | None) -> None:
    v = check(_root(tmp_path, state, config))
    assert not v.conflict and not v.certain and "not known" in v.detail


def test_an_unreadable_file_beside_a_static_one_is_still_a_conflict(tmp_path: Path) -> None:
    v = check(_root(tmp_path, STATIC_STATE, "::: not yaml :::\n  - x"))
    assert v.conflict and "unreadable" in v.detail


def test_decide_is_pure_over_what_was_found() -> None:
    found = KubeletCpuManager("/k/cpu_manager_state", "none", "/k/config.yaml", "static", (), True)
    assert decide(found).conflict and not decide(KubeletCpuManager("/k/cpu_manager_state")).conflict


def test_doctor_warns_of_a_static_kubelet_with_the_fix(tmp_path: Path) -> None:
    """`hwagent doctor` on a node whose kubelet runs the static policy: a WARN line and its fix."""
    import subprocess
    import sys

    root = _root(tmp_path, STATIC_STATE)
    out = subprocess.run([sys.executable, "-m", "agent", "doctor", "--kubelet-root-dir", str(root)],
                         capture_output=True, text=True, timeout=60).stdout
    line = next(ln for ln in out.splitlines() if "kubelet cpu manager" in ln)
    assert line.startswith("[WARN] kubelet cpu manager: the kubelet's CPU manager is static")
    assert "fix: set cpuManagerPolicy: none" in out.split(line, 1)[1].splitlines()[1]
