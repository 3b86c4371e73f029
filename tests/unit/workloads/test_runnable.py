"""Admission's question "can this node start it": the working directory and the command, looked up as execvp will."""

from __future__ import annotations

import os
import stat

from agent.contracts.pods import ContainerSpec, EnvVar, PodSpec
from agent.workloads.runnable import DEFAULT_PATH, pod_unrunnable, unrunnable


def test_a_missing_working_directory_is_named_with_what_to_do(tmp_path):
    c = ContainerSpec("main", ("true",), working_dir=str(tmp_path / "gone"))
    why = unrunnable(c)
    assert why is not None and "workingDir" in why and "does not exist" in why and "--workdir" in why
    assert unrunnable(ContainerSpec("main", ("true",), working_dir=str(tmp_path))) is None


def test_a_relative_command_is_taken_from_the_working_directory(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\n")
    c = ContainerSpec("main", ("./train.sh",), working_dir=str(tmp_path))
    why = unrunnable(c)
    assert why is not None and "not executable" in why  # there, but without the x bit
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    assert unrunnable(c) is None
    # the same name from another directory does not exist
    assert "does not exist" in (unrunnable(ContainerSpec("main", ("./train.sh",), working_dir="/")) or "")


def test_a_bare_name_is_looked_up_along_the_containers_path(tmp_path):
    (tmp_path / "tool").write_text("#!/bin/sh\n")
    os.chmod(tmp_path / "tool", 0o755)
    assert "not found along PATH" in (unrunnable(ContainerSpec("main", ("tool",))) or "")
    assert DEFAULT_PATH in (unrunnable(ContainerSpec("main", ("tool",))) or "")
    with_path = ContainerSpec("main", ("tool",), env=(EnvVar("PATH", f"/nowhere:{tmp_path}"),))
    assert unrunnable(with_path) is None
    assert unrunnable(ContainerSpec("main", ("sh", "-c", "true"))) is None


def test_the_pod_answer_names_the_first_container_that_cannot_start(tmp_path):
    spec = PodSpec("p", "default", "u", containers=(ContainerSpec("main", ("true",)),),
                   init_containers=(ContainerSpec("setup", (str(tmp_path / "missing"),), kind="init"),))
    why = pod_unrunnable(spec)
    assert why is not None and why.startswith("container setup:")
    assert pod_unrunnable(PodSpec("p", "default", "u", containers=(ContainerSpec("main", ("true",)),))) is None
