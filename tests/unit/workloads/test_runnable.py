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


def test_a_path_the_lookup_cannot_reach_reads_permission_denied_never_does_not_exist():
    """What the user's ``cd`` says behind a directory it cannot search (issue 32 item 5): the
    lookups answer EACCES for a path that is there and for one that is not, and so does the message."""
    import errno

    def denied(path: str) -> int:
        return errno.EACCES if path.startswith("/private") else 0

    wd = unrunnable(ContainerSpec("main", ("/bin/true",), working_dir="/private/x"), is_dir=denied, is_exec=denied)
    assert wd is not None and "workingDir /private/x: Permission denied" in wd and "does not exist" not in wd
    cmd = unrunnable(ContainerSpec("main", ("/private/tool",)), is_dir=denied, is_exec=denied)
    assert cmd is not None and "(/private/tool): Permission denied" in cmd and "does not exist" not in cmd
    along = unrunnable(ContainerSpec("main", ("tool",), env=(EnvVar("PATH", "/private"),)), is_dir=denied,
                       is_exec=denied)
    assert along is not None and "is not found along PATH /private" in along


def test_a_file_that_is_there_but_not_executable_keeps_its_message(tmp_path):
    f = tmp_path / "data.txt"
    f.write_text("x")
    why = unrunnable(ContainerSpec("main", (str(f),)))
    assert why is not None and "does not exist or is not executable" in why
    why = unrunnable(ContainerSpec("main", (str(tmp_path),)))  # a directory is not a command
    assert why is not None and "does not exist or is not executable" in why
