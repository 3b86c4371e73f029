"""scripts/setup.sh, the README's first command: `run` installs what running needs (the
project, no test tools) and links `hwagent` onto the PATH; `test` adds the test extras;
a second run of either installs nothing. Run in a copy of the checkout's layout with a
stand-in python that records what pip was asked, and no system steps."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "setup.sh"

#: records its arguments; `pip install` makes the console script as pip would, agent.commands._entry
#: rewrites it (its first line is what setup.sh looks at)
FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$PIP_LOG"
case "$*" in *"pip install -q -e"*) printf '#!/bin/sh\\n' > "$(dirname "$0")/hwagent"; chmod +x "$(dirname "$0")/hwagent";; esac
case "$*" in *"agent.commands._entry"*) printf '#!%s/python -S\\n' "$(cd "$(dirname "$0")" && pwd)" > "$(dirname "$0")/hwagent";; esac
exit 0
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts" / "setup.sh")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "agent" / "runtime").mkdir(parents=True)
    (tmp_path / "agent" / "runtime" / "shim.c").write_text("int main(void) { return 0; }\n")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(FAKE_PYTHON)
    (bin_dir / "python").chmod(0o755)
    shim = bin_dir / "hwagent-shim"
    shim.write_text("")
    shim.chmod(0o755)
    later = time.time() + 60
    os.utime(shim, (later, later))
    (tmp_path / "bin").mkdir()
    return tmp_path


def setup(checkout: Path, *argv: str) -> list[str]:
    """Run the copied setup.sh; the pip commands it ran."""
    log = checkout / "pip.log"
    log.unlink(missing_ok=True)
    env = dict(os.environ, PIP_LOG=str(log), HWAGENT_SETUP_SYSTEM="0", HWAGENT_BIN_DIR=str(checkout / "bin"))
    p = subprocess.run(["bash", str(checkout / "scripts" / "setup.sh"), *argv], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return log.read_text().splitlines() if log.exists() else []


def installs(pip: list[str]) -> list[str]:
    return [line.rsplit(" ", 1)[-1] for line in pip if "pip install -q -e" in line]


def test_run_installs_the_project_alone_and_links_the_command(checkout):
    pip = setup(checkout, "run")
    assert installs(pip) == ["."]
    assert pip[-1] == "-m agent.commands._entry .venv/bin/hwagent", "pip's console script is rewritten after it"
    assert (checkout / ".venv" / "bin" / "hwagent").read_text().startswith(f"#!{checkout}/.venv/bin/python -S")
    if os.geteuid() == 0:
        link = checkout / "bin" / "hwagent"
        assert link.is_symlink() and os.readlink(link) == str(checkout / ".venv" / "bin" / "hwagent")
    assert setup(checkout, "run") == []  # the second run installs nothing


def test_test_adds_the_extras_once_and_covers_run(checkout):
    assert installs(setup(checkout, "run")) == ["."]
    assert installs(setup(checkout, "test")) == [".[test,kube]"]
    assert setup(checkout, "test") == []
    assert setup(checkout, "run") == []
    assert installs(setup(checkout)) == []  # no argument: test


def test_run_keeps_the_test_tools_out_of_its_package_list():
    text = SCRIPT.read_text()
    run_list = text[text.index("RUN_PACKAGES=("):text.index("TEST_PACKAGES=(")]
    for tool in ("hwloc-nox", "linux-perf", "prometheus", "bpfcc-tools"):
        assert tool not in run_list


@pytest.mark.skipif(os.geteuid() != 0, reason="the command link is made as root only")
def test_a_foreign_hwagent_on_the_path_is_left_alone(checkout):
    other = checkout / "bin" / "hwagent"
    other.write_text("#!/bin/sh\necho another installation\n")
    setup(checkout, "run")
    assert not other.is_symlink() and "another installation" in other.read_text()
