"""Issue 32 item 6: a group member cannot fill the node with pods or logs, and ``rm`` takes
what the pod wrote.

As alice against a real daemon whose limits are small: the pod cap refuses the next pod with
RESOURCE_EXHAUSTED (HTTP and gRPC) and a message that names the limit, and admits nothing;
ended pods count until removed, and the oldest ended ones beyond the retention rule are
removed with their logs; ``rm`` (and ``launch --rm``, with or without ``--wait``) removes the
pod's log directory, so ``hwagent logs`` of a removed pod finds nothing and a new pod of the
same name starts with empty logs; links planted in the log directory (a symbolic link onto
a root-owned file and a directory, a hard link onto another user's file) are removed as
names, and what they point at keeps every byte.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.support import ALICE, MALLORY, Box, as_user, home, security_box, until

#: alice may hold this many pods (any state) at once, and keeps this many ended ones
CAP = 3
KEEP_ENDED = 2


@pytest.fixture(scope="module")
def box():
    # a group of this module's own: the shared `hwagent` group may be made and removed by another
    # module running beside this one
    yield from security_box(config={"workloads": {"max_pods_per_user": str(CAP),
                                                  "ended_pods_per_user": str(KEEP_ENDED)}},
                            group=f"hwsg{ALICE[4:]}")


def _log_dir(box: Box, name: str) -> Path:
    return box.root / "logs" / f"default_{name}"


def _names(box: Box, user: str | None) -> list[str]:
    return sorted(p["name"] for p in box.pods(user))


def _launch_wait(box: Box, name: str, *cmd: str, rm: bool = False) -> subprocess.CompletedProcess:
    r = box.cli(ALICE, "launch", "--name", name, "--wait", *(("--rm",) if rm else ()), "--", *cmd)
    assert r.returncode == 0, r.stderr
    return r


def _rm_all(box: Box) -> None:
    for user in (ALICE, None):
        for name in _names(box, user):
            box.cli(user, "rm", name)


def test_rm_removes_the_logs_and_a_same_named_pod_starts_empty(box):
    _launch_wait(box, "again", "sh", "-c", "echo first")
    assert box.cli(ALICE, "logs", "again").stdout == "first\n"
    assert _log_dir(box, "again").is_dir()
    r = box.cli(ALICE, "rm", "again")
    assert r.returncode == 0, r.stderr
    assert not os.path.lexists(_log_dir(box, "again")), os.listdir(_log_dir(box, "again"))
    r = box.cli(ALICE, "logs", "again")
    assert r.returncode != 0 and "no pod default/again" in r.stderr, (r.stdout, r.stderr)
    _launch_wait(box, "again", "sh", "-c", "echo second")
    assert box.cli(ALICE, "logs", "again").stdout == "second\n"  # not first\nsecond\n
    assert box.cli(ALICE, "rm", "again").returncode == 0


def test_launch_rm_leaves_no_log_directory(box):
    r = _launch_wait(box, "waitrm", "sh", "-c", "echo bye", rm=True)
    assert r.stdout == "bye\n"
    assert not os.path.lexists(_log_dir(box, "waitrm"))
    # without --wait the daemon removes the pod when it ends (autoremove): the same path
    r = box.cli(ALICE, "launch", "--name", "bgrm", "--rm", "--", "sh", "-c", "echo bye")
    assert r.returncode == 0, r.stderr
    until(lambda: box.pod("bgrm", ALICE) is None, "bgrm to be removed", box.daemon)
    until(lambda: not os.path.lexists(_log_dir(box, "bgrm")), "bgrm's logs to go", box.daemon)
    assert "waitrm" not in _names(box, ALICE) and "bgrm" not in _names(box, ALICE)


def test_links_in_the_log_dir_reach_nothing(box, tmp_path):
    _launch_wait(box, "linked", "sh", "-c", "echo mine")
    d = _log_dir(box, "linked")
    alice = pwd.getpwnam(ALICE)
    assert os.stat(d).st_uid == alice.pw_uid  # the user's own directory: it may put anything there
    # a root-owned file and directory, and one of mallory's files
    os.chmod(tmp_path, 0o700)
    secret = tmp_path / "root-secret"
    secret.write_text("root's\n")
    os.chmod(secret, 0o600)
    rootdir = tmp_path / "rootdir"
    rootdir.mkdir()
    (rootdir / "inside").write_text("root's too\n")
    theirs = home(MALLORY) / "mallory-file"
    theirs.write_text("mallory's\n")
    os.chown(theirs, pwd.getpwnam(MALLORY).pw_uid, pwd.getpwnam(MALLORY).pw_gid)
    os.chmod(theirs, 0o600)
    # planted as links in alice's log directory (the hard link as root: protected_hardlinks
    # stops alice making it, but a kernel without it would not)
    os.symlink(secret, d / "secret.log")
    os.symlink(rootdir, d / "dirlink")
    os.link(theirs, d / "main.log.1")
    sub = d / "sub"
    r = as_user(ALICE, "sh", "-c", f"mkdir {sub} && ln -s {rootdir} {sub}/deeper && echo x > {sub}/own")
    assert r.returncode == 0, r.stderr
    before = {p: (p.read_bytes(), os.stat(p).st_uid, os.stat(p).st_mode) for p in (secret, rootdir / "inside", theirs)}
    r = box.cli(ALICE, "rm", "linked")
    assert r.returncode == 0, r.stderr
    assert not os.path.lexists(d)
    for p, (data, uid, mode) in before.items():
        assert (p.read_bytes(), os.stat(p).st_uid, os.stat(p).st_mode) == (data, uid, mode), p
    assert os.stat(theirs).st_nlink == 1  # only the planted name went
    assert sorted(os.listdir(rootdir)) == ["inside"]


def test_ended_pods_beyond_the_retention_rule_go_with_their_logs(box):
    _rm_all(box)
    for i in range(KEEP_ENDED + 1):
        _launch_wait(box, f"old{i}", "sh", "-c", f"echo {i}")
    # the oldest ended pod is removed (record and logs); the newest KEEP_ENDED stay, logs and all
    until(lambda: _names(box, ALICE) == [f"old{i}" for i in range(1, KEEP_ENDED + 1)],
          "the oldest ended pod to be removed", box.daemon)
    assert not os.path.lexists(_log_dir(box, "old0"))
    for i in range(1, KEEP_ENDED + 1):
        assert box.cli(ALICE, "logs", f"old{i}").stdout == f"{i}\n"


def _admit_grpc(box: Box, user: str, name: str) -> tuple[str, str]:
    """Admit through the admission socket's gRPC API as ``user``: (status code name, details)."""
    manifest = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                           "spec": {"restartPolicy": "Never", "containers": [
                               {"name": "main", "command": ["/bin/sleep", "600"], "workingDir": "/"}]}})
    code = (
        "import grpc, sys\n"
        "from agent.api.admission.v1 import api_pb2 as pb, api_pb2_grpc as pbg\n"
        f"ch = grpc.insecure_channel('unix://{box.root / 'admission.sock'}')\n"
        "try:\n"
        f"    pbg.AdmissionStub(ch).Admit(pb.AdmitRequest(manifest={manifest!r}.encode()), timeout=60)\n"
        "    print('OK'); print('')\n"
        "except grpc.RpcError as e:\n"
        "    print(e.code().name); print(e.details())\n"
    )
    r = as_user(user, sys.executable, "-c", code)
    assert r.returncode == 0, r.stderr
    status, details = r.stdout.split("\n", 1)
    return status, details.strip()


def test_the_pod_cap_refuses_naming_the_limit_and_changes_nothing(box):
    _rm_all(box)
    _launch_wait(box, "ended", "true")  # an ended pod counts until it is removed
    for i in range(CAP - 1):
        r = box.cli(ALICE, "launch", "--name", f"live{i}", "--", "sleep", "600")
        assert r.returncode == 0, r.stderr
    names = _names(box, ALICE)
    assert len(names) == CAP
    r = box.cli(ALICE, "launch", "--name", "onetoomany", "--", "sleep", "600")
    assert r.returncode != 0
    want = f"user {ALICE} has {CAP} pods, the limit [workloads] max_pods_per_user is {CAP}"
    assert want in r.stderr and "hwagent rm" in r.stderr, r.stderr
    r = box.cli(ALICE, "launch", "--name", "onetoomany", "--wait", "--rm", "--", "true")
    assert r.returncode != 0 and want in r.stderr, r.stderr
    assert _admit_grpc(box, ALICE, "grpctoomany") == ("RESOURCE_EXHAUSTED", want + "; remove ended pods with "
                                                      "hwagent rm (hwagent ps lists them)")
    assert _names(box, ALICE) == names  # nothing admitted
    for n in ("onetoomany", "grpctoomany"):
        assert not os.path.lexists(_log_dir(box, n))
    # root is not capped, and a pod alice removes makes room
    r = box.cli(None, "launch", "--name", "rootpod", "--wait", "--rm", "--", "true")
    assert r.returncode == 0, r.stderr
    assert box.cli(ALICE, "rm", "ended").returncode == 0
    r = box.cli(ALICE, "launch", "--name", "fits", "--", "sleep", "600")
    assert r.returncode == 0, r.stderr
    _rm_all(box)
