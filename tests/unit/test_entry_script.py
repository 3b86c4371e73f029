"""The checkout's `hwagent` entry script starts light commands without site and the rest with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.commands._entry import LIGHT, script_text, write

REPO = Path(__file__).resolve().parents[2]


def _imports(script: Path, *argv: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "HWAGENT_"))}
    proc = subprocess.run([str(script), *argv], env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
                          capture_output=True, text=True, timeout=120)
    mods = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    return proc, mods


def _plain_env() -> dict[str, str]:
    """The environment without PYTHON* (PYTHONUNBUFFERED would write stdout through at once)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "HWAGENT_"))}


def test_write_is_idempotent_and_executable(tmp_path):
    target = tmp_path / "hwagent"
    assert write(str(target), sys.executable, str(REPO))
    assert not write(str(target), sys.executable, str(REPO)), "an unchanged script is not rewritten"
    assert os.stat(target).st_mode & 0o777 == 0o755
    assert target.read_text() == script_text(sys.executable, str(REPO))
    assert target.read_text().startswith(f"#!{sys.executable} -S\n")


def test_a_light_command_runs_without_site_and_the_others_with_it(tmp_path):
    target = tmp_path / "hwagent"
    write(str(target), sys.executable, str(REPO))
    proc, mods = _imports(target, "ps", "--root-dir", str(tmp_path / "none"))
    assert proc.returncode == 5 and "the daemon is not running" in proc.stderr, proc.stderr[-2000:]
    assert "site" not in mods and "agent.commands._admission" in mods
    # issue 37: the daemon's options before the command (docker -H, kubectl --kubeconfig) keep it light
    for before in (["--root-dir", str(tmp_path / "none")], [f"--root-dir={tmp_path / 'none'}"]):
        proc, mods = _imports(target, *before, "ps")
        assert proc.returncode == 5 and "the daemon is not running" in proc.stderr, proc.stderr[-2000:]
        assert "site" not in mods, before
    proc, mods = _imports(target, "--version")
    assert proc.returncode == 0 and "hwagent" in proc.stdout
    assert "site" in mods, "a command that may need site-packages loads site first"
    assert "ps" in LIGHT and "run" not in LIGHT


def test_a_light_command_that_imports_from_site_packages_still_finds_it(tmp_path):
    """The late finder: a module the standard library lacks but site-packages has loads site then."""
    target = tmp_path / "hwagent"
    write(str(target), sys.executable, str(REPO))
    prelude = target.read_text().split("from agent.cli import main")[0]
    code = prelude + "import ntpath, json\nassert 'site' not in sys.modules\nimport yaml\nprint(yaml.__name__)\n"
    proc = subprocess.run([sys.executable, "-S", "-c", code, "ps"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "yaml", proc.stderr[-2000:]


def test_commands_with_site_skip_the_editable_finder(tmp_path):
    """The source dir is first on sys.path, so the editable install's finder (its .pth imports
    pathlib, urllib.parse and importlib.util: ~10 ms of CPU before READY) is not installed;
    the other .pth files still run, and agent comes from the checkout."""
    import site  # noqa: PLC0415
    pths = [p for d in site.getsitepackages() for p in Path(d).glob("__editable__*.pth")]
    if not pths:
        pytest.skip("this venv has no editable install of hwagent")
    target = tmp_path / "hwagent"
    write(str(target), sys.executable, str(REPO))
    # issue 37: the daemon's options before the command (docker -H, kubectl --kubeconfig) keep it light
    for before in (["--root-dir", str(tmp_path / "none")], [f"--root-dir={tmp_path / 'none'}"]):
        proc, mods = _imports(target, *before, "ps")
        assert proc.returncode == 5 and "the daemon is not running" in proc.stderr, proc.stderr[-2000:]
        assert "site" not in mods, before
    proc, mods = _imports(target, "--version")
    assert proc.returncode == 0 and "hwagent" in proc.stdout, proc.stderr[-2000:]
    assert "site" in mods and not [m for m in mods if m.startswith("__editable__")]
    code = target.read_text().split("from agent.cli import main")[0] + "import agent\nprint(agent.__file__)\n"
    proc = subprocess.run([sys.executable, "-S", "-c", code, "run"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == str(REPO / "agent" / "__init__.py"), proc.stderr[-2000:]


@pytest.mark.parametrize(("command", "light"), [("ps", True), ("--version", False)])
def test_a_light_command_exits_without_the_interpreters_teardown(tmp_path, command, light):
    """A light command's process ends with os._exit once its output is flushed: the teardown (every
    module's objects freed one by one, ~1.5 ms of a ~10 ms launch, bench/cli.py) is skipped, so an
    atexit handler does not run; the exit status and the buffered output are what main left."""
    target = tmp_path / "hwagent"
    write(str(target), sys.executable, str(REPO))
    text = target.read_text()
    fake_main = ("def main():\n    import atexit\n    atexit.register(lambda: print('teardown'))\n"
                 "    sys.stdout.write('out, unflushed')\n    sys.stderr.write('err, unflushed')\n    return 7\n")
    assert text.count("from agent.cli import main\n") == 1
    code = text.replace("from agent.cli import main\n", fake_main)
    proc = subprocess.run([sys.executable, "-S", "-c", code, command], capture_output=True, text=True, timeout=120,
                          env=_plain_env())
    assert proc.returncode == 7, proc.stderr[-2000:]
    assert proc.stderr == "err, unflushed"
    assert proc.stdout == ("out, unflushed" if light else "out, unflushedteardown\n")


def test_a_light_commands_output_to_a_closed_pipe_exits_as_python_would(tmp_path):
    """Nothing left to flush into a pipe nobody reads: status 120, as the interpreter's own exit
    gives when it cannot flush stdout, and no traceback."""
    target = tmp_path / "hwagent"
    write(str(target), sys.executable, str(REPO))
    fake_main = "def main():\n    sys.stdout.write('x' * 100)\n    return 0\n"  # buffered: the exit flushes it
    code = target.read_text().replace("from agent.cli import main\n", fake_main)
    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run([sys.executable, "-S", "-c", code, "ps"], stdout=w, stderr=subprocess.PIPE, text=True,
                              timeout=120, env=_plain_env())
    finally:
        os.close(w)
    assert proc.returncode == 120, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
