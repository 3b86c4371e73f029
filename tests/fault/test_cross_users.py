"""A non-root caller tries to cross to another user (issue 23): another user's pod
(stop, rm, logs, describe, ps), a manifest that runs as root, ``--user`` of
someone else, a link in its own log directory onto another user's file. Each is
refused and changes nothing: the other pod keeps running with the same pid, the
file keeps its bytes."""

from __future__ import annotations

import json
import os
import pwd
import subprocess

import pytest

from tests.users_support import box, until  # noqa: F401 - box is a fixture

pytestmark = pytest.mark.timeout(400)


def test_a_member_cannot_reach_another_users_pods(box):  # noqa: F811
    r = box.cli("hwtest1", "launch", "--name", "one", "--", "sleep", "600")
    assert r.returncode == 0, r.stderr
    pid = box.running("one", "hwtest1")["containers"][0]["pid"]
    assert [p["name"] for p in box.pods("hwtest2")] == []  # ps lists its own only
    for args in (("stop", "one"), ("rm", "one"), ("describe", "one"), ("logs", "one")):
        r = box.cli("hwtest2", *args)
        assert r.returncode != 0, (args, r.stdout)
        assert "no pod default/one" in r.stderr or "no logs for pod default/one" in r.stderr \
            or "Permission denied" in r.stderr, (args, r.stderr)
    p = box.pod("one")
    assert p["phase"] == "Running" and p["containers"][0]["pid"] == pid and os.path.exists(f"/proc/{pid}")
    assert box.cli("hwtest1", "rm", "one").returncode == 0


@pytest.mark.parametrize("how", ["--user root", "--user hwtest2", "manifest runAsUser 0", "manifest runAsGroup 0"])
def test_a_member_cannot_run_as_someone_else(box, how):  # noqa: F811
    if how.startswith("--user"):
        r = box.cli("hwtest1", "launch", "--name", "bad", *how.split(), "--", "sleep", "600")
    else:
        key = how.split()[1]
        manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
                    "spec": {"securityContext": {key: 0}, "restartPolicy": "Never",
                             "containers": [{"name": "main", "command": ["/bin/sleep", "600"], "workingDir": "/"}]}}
        path = os.path.join(pwd.getpwnam("hwtest1").pw_dir, "bad.json")
        with open(path, "w") as f:
            json.dump(manifest, f)
        os.chmod(path, 0o644)
        r = box.cli("hwtest1", "admit", path)
    assert r.returncode != 0
    assert "may run pods only as itself" in r.stderr or "is not in group 0" in r.stderr, r.stderr
    assert box.pod("bad") is None  # nothing admitted


def test_a_link_in_its_own_log_dir_reaches_nothing_of_another_user(box):  # noqa: F811
    r = box.cli("hwtest2", "launch", "--name", "victim", "--", "sh", "-c", "echo secret; sleep 600")
    assert r.returncode == 0, r.stderr
    box.running("victim", "hwtest2")
    target = os.path.join(pwd.getpwnam("hwtest2").pw_dir, "precious")
    with open(target, "w") as f:
        f.write("keep\n")
    os.chown(target, pwd.getpwnam("hwtest2").pw_uid, pwd.getpwnam("hwtest2").pw_gid)
    os.chmod(target, 0o600)
    # hwtest1 owns its pod's log directory (rm takes it, issue 32): while an init container waits,
    # hwtest1 plants a link where the app container's log goes
    link = box.root / "logs" / "default_linker" / "main.log"
    wait = f"i=0; while [ ! -L {link} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done"
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "linker"},
                "spec": {"restartPolicy": "Never", "initContainers": [
                    {"name": "wait", "command": ["/bin/sh", "-c", wait], "workingDir": "/"}],
                    "containers": [{"name": "main", "command": ["/bin/sh", "-c", "echo overwritten"],
                                    "workingDir": "/"}]}}
    path = os.path.join(pwd.getpwnam("hwtest1").pw_dir, "linker.json")
    with open(path, "w") as f:
        json.dump(manifest, f)
    os.chmod(path, 0o644)
    r = box.cli("hwtest1", "admit", path)
    assert r.returncode == 0, r.stderr
    until(lambda: link.parent.is_dir(), "linker's log directory")
    subprocess.run(["runuser", "-u", "hwtest1", "--", "ln", "-s", target, str(link)], check=True, timeout=60)
    p = until(lambda: (q := box.pod("linker")) and q["phase"] in ("Failed", "Succeeded") and q, "linker to end")
    assert p["phase"] == "Failed" and "symbolic link" in p["message"], p
    with open(target) as f:
        assert f.read() == "keep\n"
    # hwtest2's own log is untouched by hwtest1 and unreadable to it
    r = box.cli("hwtest1", "logs", "victim")
    assert r.returncode != 0
    for n in ("victim", "linker"):
        box.cli(None, "rm", n)


def test_a_user_outside_the_group_is_told_to_ask_for_it(box):  # noqa: F811
    """EACCES on the socket is not "the daemon is not running": it names the socket's owner, group and
    mode and the group to be added to."""
    user = "hwtest3"
    made = subprocess.run(["getent", "passwd", user], capture_output=True).returncode != 0
    if made:
        subprocess.run(["useradd", "-m", user], check=True, capture_output=True, timeout=60)
    try:
        r = box.cli(user, "ps")
        assert r.returncode == 5, r.stderr
        sock = box.root / "cli.sock"
        assert f"permission denied: {sock} is root:hwagent 0660; ask an admin to add you to group hwagent" \
            in r.stderr, r.stderr
        assert "not running" not in r.stderr
    finally:
        if made:
            subprocess.run(["userdel", "-r", user], capture_output=True, timeout=60)
