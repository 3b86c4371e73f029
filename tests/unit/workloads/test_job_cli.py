"""The caller's side of a job (no daemon): env and command resolution, the STATUS word,
the exit status of --wait, Ctrl-C counting, and errors that say what to do (issue 23)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from agent.cli import CommandError
from agent.commands._admission import error_for
from agent.commands._exitcodes import (
    EXIT_EVICTED, EXIT_EXISTS, EXIT_LOST, EXIT_NO_DAEMON, EXIT_NOT_FOUND, EXIT_OOM, EXIT_REFUSED, EXIT_START_FAILED,
)
from agent.commands._job import env_file_items, env_items, outcome, resolve_command
from agent.commands._podstatus import restarts, status_word
from agent.commands._wait import Interrupts
from agent.commands.launch import add_parser, job_environment, manifest_from_flags
from agent.workloads.manifest import parse_manifest

SOCK = Path("/run/hwagent/admission.sock")


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return parser.parse_args(["launch", *argv])


def ctr(name="main", kind="app", state="running", reason="", exit_code=None, restart_count=0, pid=0):
    return {"name": name, "kind": kind, "state": state, "reason": reason, "exit_code": exit_code,
            "restart_count": restart_count, "pid": pid, "message": ""}


def pod(phase="Running", reason="", *containers, message=""):
    return {"namespace": "default", "name": "j", "phase": phase, "reason": reason, "message": message,
            "containers": list(containers) or [ctr()]}


# --- the manifest a launch from flags sends ---------------------------------------------------

def test_a_launch_runs_once_in_the_callers_directory_unless_told(tmp_path):
    args = parse("--name", "j", "--env", "A=1", "--", "sh", "-c", "true")
    env, workdir = job_environment(args, str(tmp_path), {})
    m = manifest_from_flags(args, env=env, workdir=workdir)
    assert m["spec"]["restartPolicy"] == "Never"
    c = m["spec"]["containers"][0]
    assert c["workingDir"] == str(tmp_path) and c["env"] == [{"name": "A", "value": "1"}]
    p = parse_manifest(json.dumps(m)).pod  # what the daemon reads back
    assert p.restart_policy == "Never" and p.containers[0].working_dir == str(tmp_path)
    for flag, policy in (("on-failure", "OnFailure"), ("always", "Always")):
        assert manifest_from_flags(parse("--restart", flag, "--", "true"))["spec"]["restartPolicy"] == policy
    _env, rel = job_environment(parse("--workdir", "sub", "--", "true"), str(tmp_path), {})
    assert rel == str(tmp_path / "sub")


def test_env_file_then_env_the_later_wins(tmp_path):
    (tmp_path / "e").write_text("# a comment\n\nA=file\nB=two words\nHOME\n")
    args = parse("--env-file", "e", "--env", "A=flag", "--", "true")
    env, _ = job_environment(args, str(tmp_path), {"HOME": "/home/me"})
    m = manifest_from_flags(args, env=env)
    assert m["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "flag"}, {"name": "B", "value": "two words"}, {"name": "HOME", "value": "/home/me"}]
    with pytest.raises(CommandError, match="not set in your environment"):
        env_items(["NOPE"], {})
    with pytest.raises(CommandError, match="NAME=VALUE"):
        env_file_items("=x\n", "e", {})
    with pytest.raises(CommandError, match="--env-file missing"):
        job_environment(parse("--env-file", "missing", "--", "true"), str(tmp_path), {})


def test_the_command_is_resolved_against_the_callers_path_and_directory(tmp_path):
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert resolve_command("tool", f"/nowhere:{tmp_path / 'bin'}", "/") == str(tool)
    assert resolve_command("./bin/tool", None, str(tmp_path)) == str(tool)
    with pytest.raises(CommandError, match="not found along your PATH") as e:
        resolve_command("tool", "/nowhere", str(tmp_path))
    assert e.value.code == EXIT_REFUSED
    with pytest.raises(CommandError, match="does not exist; nothing was launched"):
        resolve_command("./train.sh", None, str(tmp_path))
    (tmp_path / "train.sh").write_text("#!/bin/sh\n")
    with pytest.raises(CommandError, match="is not executable"):
        resolve_command("./train.sh", None, str(tmp_path))
    m = manifest_from_flags(parse("--name", "j", "--", "tool", "x"), lambda c: str(tool))
    assert m["spec"]["containers"][0]["command"] == [str(tool), "x"]


def test_quiet_goes_with_wait_and_a_manifest_takes_no_job_flags(tmp_path):
    from agent.commands.launch import REMOVE_ON_EXIT, manifest_from_flags, run

    with pytest.raises(CommandError, match="goes with --wait"):
        run(parse("-q", "--", "true"))
    # --rm without --wait is the daemon's: the pod asks for it; with --wait the CLI removes it itself
    assert manifest_from_flags(parse("--rm", "--", "true"))["metadata"]["annotations"] == {REMOVE_ON_EXIT: "true"}
    assert "annotations" not in manifest_from_flags(parse("--rm", "--wait", "--", "true"))["metadata"]
    with pytest.raises(CommandError, match="needs --wait"):
        run(parse("-f", str(tmp_path / "p.yaml"), "--rm"))
    with pytest.raises(CommandError, match="drop the other pod flags"):
        run(parse("-f", str(tmp_path / "p.yaml"), "--restart", "never"))


# --- what ps says, and what --wait exits with -------------------------------------------------

def test_status_word_is_kubectls():
    assert status_word(pod("Running", "", ctr(state="waiting", reason="CrashLoopBackOff", exit_code=1))) == \
        "CrashLoopBackOff"
    assert status_word(pod("Failed", "StartError", ctr(state="terminated", reason="StartError", exit_code=128))) == \
        "StartError"
    assert status_word(pod("Failed", "Error", ctr(state="terminated", reason="OOMKilled", exit_code=137))) == \
        "OOMKilled"
    assert status_word(pod("Succeeded", "Completed", ctr(state="terminated", reason="Completed", exit_code=0))) == \
        "Completed"
    assert status_word(pod("Failed", "Evicted", ctr(state="terminated", reason="Error", exit_code=137))) == "Evicted"
    assert status_word(pod("Pending", "Admitted", ctr(state="waiting", reason="ContainerCreating"))) == \
        "ContainerCreating"
    assert status_word(pod("Running", "", ctr())) == "Running"
    init_ok = ctr("i", "init", "terminated", "Completed", 0)
    assert status_word(pod("Running", "", init_ok, ctr())) == "Running"
    assert status_word(pod("Pending", "", ctr("i", "init", "terminated", "Error", 2), ctr(state="waiting"))) == \
        "Init:Error"
    assert status_word(pod("Pending", "", ctr("i", "init", "running"), ctr(state="waiting",
                                                                           reason="PodInitializing"))) == "Init:0/1"
    assert restarts(pod("Running", "", ctr(restart_count=2), ctr("b", restart_count=1))) == 3


def test_wait_exit_status_is_the_jobs_or_a_documented_code():
    assert outcome(pod("Failed", "Error", ctr(state="terminated", reason="Error", exit_code=3))) == (3, "")
    assert outcome(pod("Failed", "Stopped", ctr(state="terminated", reason="Error", exit_code=143)))[0] == 143
    assert outcome(pod("Failed", "Error", ctr(state="terminated", reason="OOMKilled", exit_code=137)))[0] == EXIT_OOM
    code, why = outcome(pod("Failed", "StartError", ctr(state="terminated", reason="StartError", exit_code=128),
                            message="container main: exec: No such file"))
    assert code == EXIT_START_FAILED and "No such file" in why
    assert outcome(pod("Failed", "InitContainerFailed", ctr(state="terminated", reason="NotStarted")))[0] == \
        EXIT_START_FAILED
    assert outcome(pod("Failed", "Evicted", ctr(state="terminated", reason="Error", exit_code=137)))[0] == \
        EXIT_EVICTED
    assert outcome(pod("Failed", "Stopped", ctr(state="terminated", reason="NotStarted")))[0] == EXIT_LOST
    # the named main container, not another app container
    two = pod("Failed", "Error", ctr("side", exit_code=0, state="terminated"), ctr("main", exit_code=5,
                                                                                   state="terminated"))
    assert outcome(two, "main")[0] == 5 and outcome(two)[0] == 0


def test_ctrl_c_reports_then_stops_on_a_second_press_within_the_window():
    now = [0.0]
    ints = Interrupts(window=1.0, clock=lambda: now[0])
    ints.press()
    assert ints.report and not ints.stop
    ints.report = False
    now[0] = 2.5  # too late: a first press again
    ints.press()
    assert ints.report and not ints.stop
    now[0] = 3.2
    ints.press()
    assert ints.stop


# --- errors that say what to do -----------------------------------------------------------------

def test_grpc_errors_become_one_line_with_the_next_command():
    down = error_for("UNAVAILABLE", "failed to connect to all addresses; last error: ... Connection refused", SOCK)
    assert down.code == EXIT_NO_DAEMON
    assert str(down) == (f"the daemon is not running (no answer on {SOCK}); start it with `hwagent run` "
                         "(or `systemctl start hwagent`)")
    e = error_for("ALREADY_EXISTS", "a pod named default/web already exists", SOCK, "web")
    assert e.code == EXIT_EXISTS and "`hwagent rm web`" in str(e)
    e = error_for("INVALID_ARGUMENT", "invalid manifest: spec.containers[0].image: unknown field (known here: ...)",
                  SOCK)
    assert e.code == EXIT_REFUSED and "--ignore-unknown-fields" in str(e)
    e = error_for("NOT_FOUND", "no pod default/x", SOCK)
    assert e.code == EXIT_NOT_FOUND and "hwagent ps" in str(e)
    for code in ("RESOURCE_EXHAUSTED", "INVALID_ARGUMENT", "INTERNAL", "DEADLINE_EXCEEDED", "FAILED_PRECONDITION"):
        assert code not in str(error_for(code, "why", SOCK))


def test_env_file_takes_export_and_names_the_file_and_line(tmp_path):
    """Issue 37 item 12: `export C=3` (a shell-sourceable env file, docker compose's .env) was refused
    by the daemon as "spec.containers[0].env[2].name", which names neither the file nor the line."""
    (tmp_path / "e").write_text("A=1\n# comment\nexport C=3\nexport\tD=4\nexport=5\nexport\n")
    env, _ = job_environment(parse("--env-file", "e", "--", "true"), str(tmp_path), {"export": "x"})
    assert env == [("A", "1"), ("C", "3"), ("D", "4"), ("export", "5"), ("export", "x")]
    for line, words in (("B C=1", "'B C'"), ("1X=2", "'1X'"), ("export  =1", "NAME=VALUE"), ("A\u00e9=1", "'A\u00e9'")):
        (tmp_path / "bad").write_text(f"OK=1\n\n{line}\n")
        with pytest.raises(CommandError) as ei:
            job_environment(parse("--env-file", "bad", "--", "true"), str(tmp_path), {})
        assert str(ei.value).startswith("--env-file bad:3:") and words in str(ei.value), str(ei.value)
    with pytest.raises(CommandError, match="-e 'B C': "):
        env_items(["B C=1"], {}, where="-e")
