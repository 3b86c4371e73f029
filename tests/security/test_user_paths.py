"""A user's paths are looked up as that user (issue 32 item 5).

The daemon runs as root and checks a pod's working directory and command at
admission. Checked as root, it told alice what exists where alice cannot look:
``--workdir /root/.pyenv`` was admitted (and failed at start with "Permission
denied") while ``--workdir /root/.nothere`` was refused with "does not exist on
this node". Here every such pair, present and absent behind a directory alice
cannot search, must get the same answer, the one alice's own shell gives
("Permission denied"), and nothing is admitted for either. Root's own launches
keep seeing what root sees.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.support import ALICE, as_user, home, security_box, write_as
from tests.users_support import HWAGENT, Box

pytestmark = pytest.mark.timeout(300)

#: a hang fails the call (runuser's child killed) rather than the whole run
CLI_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    # a socket group of this module's own: another run's box that removes a shared "hwagent" group
    # at its end would take alice's membership with it
    yield from security_box(group=f"hwsg{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def private() -> Iterator[Path]:
    """root's 0700 directory (as /root is): a directory, an executable and a bin/ with a tool
    inside, all of them world-readable, so only the way in is closed to alice."""
    d = Path(tempfile.mkdtemp(prefix="hwsec-private-", dir="/var/tmp"))
    try:
        os.chmod(d, 0o700)
        (d / "present").mkdir(mode=0o755)
        (d / "bin").mkdir(mode=0o755)
        for exe in (d / "present-exe", d / "bin" / "hwsecret"):
            exe.write_text("#!/bin/sh\necho ran\n")
            exe.chmod(0o755)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def alice_cli(box: Box, *args: str) -> tuple[int, str]:
    """The CLI as alice in her home: (exit status, stderr)."""
    r = as_user(ALICE, "timeout", "-s", "KILL", str(CLI_TIMEOUT_S), str(HWAGENT), args[0], "--root-dir",
                str(box.root), *args[1:], timeout=CLI_TIMEOUT_S + 30)
    assert r.returncode != 137, f"hwagent {' '.join(args)} hung: {r.stderr}"
    return r.returncode, r.stderr


def manifest(name: str, command: list[str], workdir: str = "/", env: dict[str, str] | None = None) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                       "spec": {"restartPolicy": "Never", "containers": [{
                           "name": "main", "command": command, "workingDir": workdir,
                           "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}]}})


def admit_as_alice(box: Box, name: str, body: str) -> tuple[int, str]:
    path = write_as(ALICE, home(ALICE) / f"{name}.json", body)
    return alice_cli(box, "admit", str(path))


def alice_pods(box: Box) -> list[str]:
    return [p["name"] for p in box.pods(ALICE)]


def same_answer(a: tuple[int, str], b: tuple[int, str], present: str, absent: str) -> None:
    """Both refused with the same words once the two names are made one."""
    assert a[0] != 0 and b[0] != 0, (a, b)
    assert a[1].replace(present, "X") == b[1].replace(absent, "X"), (a, b)


def test_alices_shell_cannot_tell_them_apart(box, private):
    """The reference: what alice's own shell says for either."""
    for name in ("present", "absent"):
        r = as_user(ALICE, "bash", "-c", f"cd {private / name}")
        assert r.returncode != 0 and "Permission denied" in r.stderr, r.stderr


@pytest.mark.parametrize("how", ["launch --workdir", "manifest workingDir"])
def test_a_workdir_behind_a_closed_directory_reads_permission_denied_whether_or_not_it_exists(box, private, how):
    answers = []
    for i, name in enumerate(("present", "absent")):
        wd = str(private / name)
        pod = f"wd-{how.split()[0]}-{i}"
        if how.startswith("launch"):
            answers.append(alice_cli(box, "launch", "--wait", "--rm", "--name", pod, "--workdir", wd, "--",
                                     "/bin/pwd"))
        else:
            answers.append(admit_as_alice(box, pod, manifest(pod, ["/bin/pwd"], wd)))
    same_answer(answers[0], answers[1], "present", "absent")
    assert "Permission denied" in answers[0][1], answers
    assert "does not exist" not in answers[0][1], answers
    assert not [p for p in alice_pods(box) if p.startswith("wd-")]  # nothing admitted for either


@pytest.mark.parametrize("how", ["launch --workdir", "manifest workingDir"])
def test_a_directory_alice_cannot_enter_is_refused_before_anything_is_admitted(box, private, how):
    """The closed directory itself (as /root is): alice may stat it, not enter it. Before the fix it
    was admitted, given CPUs, and failed at start (StartError, exit 200: "chdir: ...: Permission
    denied"); her own shell's cd refuses it at once, and so does admission now."""
    pod = f"closed-{how.split()[0]}"
    if how.startswith("launch"):
        code, err = alice_cli(box, "launch", "--wait", "--rm", "--name", pod, "--workdir", str(private), "--",
                              "/bin/pwd")
    else:
        code, err = admit_as_alice(box, pod, manifest(pod, ["/bin/pwd"], str(private)))
    assert code not in (0, 200) and "Permission denied" in err, err
    assert pod not in alice_pods(box)


@pytest.mark.parametrize("how", ["launch command", "manifest command", "manifest PATH"])
def test_a_command_behind_a_closed_directory_reads_the_same_whether_or_not_it_exists(box, private, how):
    answers = []
    for i, (exe, tool) in enumerate((("present-exe", "hwsecret"), ("absent-exe", "hwnothere"))):
        pod = f"cmd-{how.split()[0]}-{how.split()[1].lower()}-{i}"
        if how == "launch command":
            answers.append(alice_cli(box, "launch", "--wait", "--rm", "--name", pod, "--", str(private / exe)))
        elif how == "manifest command":
            answers.append(admit_as_alice(box, pod, manifest(pod, [str(private / exe)])))
        else:
            answers.append(admit_as_alice(box, pod, manifest(pod, [tool], env={"PATH": str(private / "bin")})))
    if how == "manifest PATH":
        same_answer((answers[0][0], answers[0][1].replace("hwsecret", "T")),
                    (answers[1][0], answers[1][1].replace("hwnothere", "T")), "present", "absent")
        assert "not found along PATH" in answers[0][1], answers
    else:
        same_answer(answers[0], answers[1], "present-exe", "absent-exe")
        assert "Permission denied" in answers[0][1], answers
    assert not [p for p in alice_pods(box) if p.startswith("cmd-")]


def test_what_alice_can_reach_still_runs(box):
    """Her own 0700 home as the working directory, a script of hers by a relative path."""
    h = home(ALICE)
    os.chmod(h, 0o700)
    (h / "bin").mkdir(exist_ok=True)
    os.chown(h / "bin", *(os.stat(h).st_uid, os.stat(h).st_gid))
    write_as(ALICE, h / "bin" / "hello.sh", "#!/bin/sh\necho hello from $(pwd)\n", mode=0o700)
    r = as_user(ALICE, str(HWAGENT), "launch", "--root-dir", str(box.root), "--wait", "--rm", "--name", "mine",
                "--", "./bin/hello.sh", timeout=CLI_TIMEOUT_S)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"hello from {h}"
    code, err = admit_as_alice(box, "mine-m", manifest("mine-m", ["bin/hello.sh"], str(h)))
    assert code == 0, err
    assert box.cli(ALICE, "rm", "mine-m").returncode == 0


def test_root_still_sees_what_root_sees(box, private):
    """Root's own pods are looked up as root (unchanged); a pod root runs as alice is looked up as alice."""
    r = box.cli(None, "launch", "--wait", "--rm", "--name", "rootwd", "--workdir", str(private / "present"),
                "--", str(private / "present-exe"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ran"
    r = box.cli(None, "launch", "--wait", "--rm", "--name", "rootabsent", "--workdir", str(private / "absent"),
                "--", "/bin/true")
    assert r.returncode != 0 and "does not exist" in r.stderr, r.stderr
    r = box.cli(None, "launch", "--wait", "--rm", "--name", "foralice", "--user", ALICE,
                "--workdir", str(private / "present"), "--", "/bin/pwd")
    assert r.returncode != 0 and "Permission denied" in r.stderr, r.stderr
    assert box.pod("foralice") is None
