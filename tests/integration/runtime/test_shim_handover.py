"""How the workload's environment and descriptors reach it through the shim (issue 32 items 1, 3).

The shim runs with hwagent's fixed environment; the job's travels as data (a memfd at
``-e 4``) and becomes the workload's only in its exec, where the command is also looked up
along the job's PATH. Nothing the daemon holds open crosses to the shim or the workload.
Run for both shims through the launcher itself (no cgroups: these are about the handover)."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
from pathlib import Path

import pytest

from agent.runtime.launcher import SHIM_ENV, LaunchError, encode_env, shim_command, spawn, wait_exit
from agent.runtime.shim import read_env
from agent.runtime.state import ContainerFiles

SHIMS = {"c": "", "python": "python"}


def _start(tmp_path: Path, shim: str, argv: list[str], env: dict[str, str]) -> tuple[str, int]:
    """Run ``argv`` through the shim to its end: (its log, its exit code)."""
    files = ContainerFiles(tmp_path / "state")
    files.path.mkdir()
    log = tmp_path / "main.log"

    async def go() -> int:
        started = await spawn(shim_command(SHIMS[shim]), files, log, log_max=0, log_keep=0, cwd=str(tmp_path),
                              procs=[], binds=[], argv=argv, env=env)
        return (await wait_exit(started, files)).exit_code

    code = asyncio.run(go())
    return log.read_text(), code


@pytest.fixture(params=sorted(SHIMS))
def shim(request) -> str:
    if request.param == "c" and not shim_command("")[0].endswith("hwagent-shim"):
        pytest.skip("the C shim is not built (scripts/setup.sh)")
    return request.param


def test_the_workload_gets_exactly_the_jobs_environment(tmp_path, shim):
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": "", "ODD": "a=b c\n\t", "EMPTY": ""}
    out, code = _start(tmp_path, shim, ["/usr/bin/env", "-0"], env)
    assert code == 0
    got = dict(e.split("=", 1) for e in out.split("\0") if e)
    assert got == env


def test_the_command_is_found_along_the_jobs_path_not_the_shims(tmp_path, shim):
    bindir = tmp_path / "mybin"
    bindir.mkdir()
    tool = bindir / "hwagent-only-here"
    tool.write_text("#!/bin/sh\necho found \"$PATH\"\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    assert str(bindir) not in SHIM_ENV["PATH"]
    out, code = _start(tmp_path, shim, ["hwagent-only-here"], {"PATH": f"{bindir}:/usr/bin:/bin"})
    assert (out, code) == (f"found {bindir}:/usr/bin:/bin\n", 0)


def test_no_descriptor_of_the_daemons_reaches_the_workload(tmp_path, shim):
    """An inheritable descriptor of the daemon's (bcc's were: programs and maps) stays behind."""
    leaked = os.open("/dev/null", os.O_RDONLY)
    os.set_inheritable(leaked, True)
    try:
        out, code = _start(tmp_path, shim, ["/bin/sh", "-c", "ls /proc/$$/fd"], {"PATH": "/usr/bin:/bin"})
    finally:
        os.close(leaked)
    assert code == 0
    assert sorted(int(n) for n in out.split()) == [0, 1, 2]


def test_an_impossible_environment_is_refused_before_anything_starts(tmp_path):
    for env in ({"A=B": "1"}, {"": "1"}, {"A": "nul\0inside"}):
        with pytest.raises(LaunchError) as e:
            encode_env(env)
        assert e.value.stage == "env"
    assert encode_env({"A": "1", "B": ""}) == b"A=1\0B=\0"


@pytest.mark.parametrize("data", [b"NOEQUALS\0", b"=value\0", b"A=1"])
def test_a_shim_refuses_malformed_environment_data(tmp_path, shim, data):
    """What the shim reads at ENV_FD is checked: a start error naming the environment, no workload."""
    state = tmp_path / "state"
    state.mkdir()
    m = os.memfd_create("env")
    os.write(m, data)
    os.lseek(m, 0, os.SEEK_SET)
    r, w = os.pipe()
    try:
        argv = [*shim_command(SHIMS[shim]), str(state), str(tmp_path / "log"), "0", "0", str(w), "/",
                "-e", str(m), "--", "/bin/touch", str(tmp_path / "ran")]
        p = subprocess.run(argv, pass_fds=(m, w), env=SHIM_ENV, timeout=60, capture_output=True)
    finally:
        os.close(m)
        os.close(w)
    with os.fdopen(r) as f:
        line = f.read()
    assert line.startswith("error env "), (line, p.stderr)
    assert (state / "exit").read_text().startswith("error env ")
    assert not (tmp_path / "ran").exists()
    with pytest.raises(ValueError):
        rr, ww = os.pipe()
        os.write(ww, data)
        os.close(ww)
        try:
            read_env(rr)
        finally:
            os.close(rr)

