"""Shell completion completes option values (--qos, --restart) and pod names, in a real bash."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import build_parser, main
from agent.commands.completion import option_values, pod_commands, script
from agent.contracts.pods import AdmittedPod
from agent.workloads.manifest import parse_manifest
from agent.workloads.store import PodFileStore, PodRecord

BIN = Path(sys.executable).parent

needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")


def _store(root: Path, *pods: tuple[str, str]) -> None:
    store = PodFileStore(root / "workloads" / "pods", root_dir=root)
    for i, (namespace, name) in enumerate(pods):
        text = f"metadata: {{name: {name}, namespace: {namespace}, uid: u-{i}}}\nspec: {{containers: [{{name: c, command: [\"/bin/true\"]}}]}}\n"
        store.put(PodRecord(AdmittedPod(spec=parse_manifest(text).pod, qos="shared", assignments={}, admitted_at=float(i))))


def _complete(words: list[str], env: dict[str, str] | None = None) -> list[str]:
    """What bash offers for the last word of ``words`` (COMPREPLY, as the shell would)."""
    quoted = " ".join(f"'{w}'" for w in words)
    probe = f'{script("bash")}\nCOMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _hwagent; printf "%s\\n" "${{COMPREPLY[@]}}"\n'
    full = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **(env or {})}
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60, check=True, env=full).stdout
    return sorted(w for w in out.splitlines() if w)


def test_option_values_come_from_the_parser():
    values = option_values(build_parser())
    assert values["launch"]["--restart"] == ["always", "never", "on-failure"]
    assert values["launch"]["--qos"] == ["dedicated", "reclaimed", "shared", "system"]


@needs_bash
def test_bash_completes_qos_and_restart_values():
    assert _complete(["hwagent", "launch", "--restart", ""]) == ["always", "never", "on-failure"]
    assert _complete(["hwagent", "launch", "--restart", "o"]) == ["on-failure"]
    assert _complete(["hwagent", "launch", "--cpus", "2", "--qos", "ded"]) == ["dedicated"]


def test_completion_pods_lists_the_stored_pods_of_a_namespace(tmp_path, capsys):
    _store(tmp_path, ("default", "web"), ("default", "train"), ("batch", "etl"))
    assert main(["completion", "pods", "--root-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == ["train", "web"]
    assert main(["completion", "pods", "--root-dir", str(tmp_path), "--namespace", "batch"]) == 0
    assert capsys.readouterr().out.split() == ["etl"]


def test_completion_pods_is_quiet_without_a_store(tmp_path, capsys):
    # no daemon ever ran here (or the store is root's): nothing to offer, no error on the terminal
    assert main(["completion", "pods", "--root-dir", str(tmp_path / "none")]) == 0
    assert capsys.readouterr() == ("", "")


@needs_bash
def test_bash_completes_pod_names_for_pod_commands(tmp_path):
    _store(tmp_path, ("default", "web"), ("default", "train"), ("batch", "etl"))
    root = ["--root-dir", str(tmp_path)]
    for cmd in ("stop", "rm", "logs", "describe"):
        assert _complete(["hwagent", cmd, *root, ""]) == ["train", "web"], cmd
    assert _complete(["hwagent", "logs", *root, "w"]) == ["web"]
    assert _complete(["hwagent", "rm", *root, "web", "t"]) == ["train"]  # rm takes several
    assert _complete(["hwagent", "stop", *root, "--namespace", "batch", ""]) == ["etl"]
    # a command that takes no pod name completes files, as before
    assert "train" not in _complete(["hwagent", "admit", *root, ""])


def test_pod_commands_are_those_taking_a_pod_name():
    assert {"stop", "rm", "logs", "describe"} <= set(pod_commands(build_parser()))
    assert not {"launch", "admit", "ps", "completion"} & set(pod_commands(build_parser()))


def test_zsh_script_completes_values_and_pods():
    text = script("zsh")
    assert "--restart[--restart]:value:(always never on-failure)" in text and "'*:pod:_hwagent_pods'" in text
    assert "completion pods" in text


@needs_bash
def test_bash_completes_signal_names_after_the_pod_name(tmp_path):
    _store(tmp_path, ("default", "web"))
    root = ["--root-dir", str(tmp_path)]
    assert _complete(["hwagent", "signal", *root, ""]) == ["web"], "first the pod"
    assert _complete(["hwagent", "signal", *root, "web", "US"]) == ["USR1", "USR2"]
    assert {"TERM", "HUP", "KILL", "INT"} <= set(_complete(["hwagent", "signal", *root, "web", ""]))
    # a flag's value is no positional: the pod is still to come after -c C
    assert _complete(["hwagent", "signal", "-c", "main", *root, ""]) == ["web"]


def test_zsh_script_completes_signal_names():
    text = script("zsh")
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("signal)"))
    assert "'1:pod:_hwagent_pods'" in line and "2:signal:(HUP INT" in line and " TERM " in line
