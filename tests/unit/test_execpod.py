"""`hwagent exec`'s decisions (pure): which cgroups to join, which pid, which user, which command."""

from __future__ import annotations

import argparse

import pytest

from agent.cli import CommandError
from agent.commands.execpod import _argv, exec_target


def _pod(pids=(41, 42), run_as=None) -> dict:
    return {"name": "p", "namespace": "default", "phase": "Running", "cgroup": "/hw/podU",
            "cgroup_dirs": ["/sys/fs/cgroup/cpuset/hw/podU", "/sys/fs/cgroup/unified/hw/podU"],
            "record": {"pod": {"spec": {"run_as": run_as}}},
            "containers": [{"name": "setup", "kind": "init", "cgroup": "/hw/podU/setup", "pids": []},
                           {"name": "main", "kind": "app", "cgroup": "/hw/podU/main", "pids": list(pids)}]}


def test_the_first_app_container_in_every_hierarchy_as_the_pods_user():
    t = exec_target(_pod(run_as={"uid": 1000, "gid": 100, "groups": [27]}))
    assert t.container == "main" and t.pid == 41 and t.user == (1000, 100, (27,))
    assert t.cgroups == ("/sys/fs/cgroup/cpuset/hw/podU/main",
                         "/sys/fs/cgroup/unified/hw/podU/main")
    assert exec_target(_pod()).user is None  # a pod without run_as runs as root


def test_refusals_name_the_containers_or_the_state():
    with pytest.raises(CommandError, match="no container 'x'.*setup, main") as e:
        exec_target(_pod(), "x")
    assert e.value.code == 3
    with pytest.raises(CommandError, match="runs nothing now") as e:
        exec_target(_pod(pids=()))
    assert e.value.code == 1
    with pytest.raises(CommandError, match="runs nothing now"):
        exec_target(_pod(), "setup")


def _ns(cmd: list[str]) -> argparse.Namespace:
    """What the exec subcommand's parser gives before ``_argv`` looks at the remainder."""
    return argparse.Namespace(cmd=cmd, container="", namespace="default", tty=False, env=[], workdir=None)


def test_options_between_name_and_the_double_dash_are_taken():
    a = _ns(["-c", "side", "--namespace", "ns", "-t", "-e", "K=V", "-w", "/tmp", "--", "sh", "-c", "x"])
    assert _argv(a) == ["sh", "-c", "x"] and a.container == "side" and a.namespace == "ns"
    assert a.tty is True and a.env == ["K=V"] and a.workdir == "/tmp"
    assert _argv(_ns(["ls", "-l"])) == ["ls", "-l"]
    with pytest.raises(CommandError, match="missing") as e:
        _argv(_ns(["--"]))
    assert e.value.code == 2
    with pytest.raises(CommandError, match="--bogus"):
        _argv(_ns(["--bogus", "--", "ls"]))


def test_tty_environ_takes_the_callers_term_unless_e_sets_it():
    from agent.commands.execpod import tty_environ

    env = {"TERM": "dumb", "A": "1"}
    assert tty_environ(env, {"TERM": "xterm"}, []) == {"TERM": "xterm", "A": "1"}
    assert tty_environ(env, {"TERM": "xterm"}, [("TERM", "vt100")]) == env  # -e already applied it
    assert tty_environ(env, {}, []) == env
