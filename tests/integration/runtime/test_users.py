"""A workload runs as a user (issue 23): root's pods as root unless it names a user, a
member of the admission socket's group gets pods that run as itself (its groups
included) and logs that are its own, on this machine with real users."""

from __future__ import annotations

import grp
import os
import pwd

import pytest

from tests.users_support import GROUP, box, proc_ids, until  # noqa: F401 - box is a fixture

pytestmark = pytest.mark.timeout(400)


def test_root_pods_run_as_root_unless_it_names_a_user(box):  # noqa: F811
    r = box.cli(None, "launch", "--name", "rootpod", "--", "sleep", "600")
    assert r.returncode == 0, r.stderr
    ids = proc_ids(box.running("rootpod")["containers"][0]["pid"])
    assert ids["Uid"] == [0, 0, 0, 0] and ids["Gid"] == [0, 0, 0, 0]

    u = pwd.getpwnam("hwtest1")
    r = box.cli(None, "launch", "--name", "forone", "--user", "hwtest1", "--", "sh", "-c", "id -u; sleep 600")
    assert r.returncode == 0, r.stderr
    pid = box.running("forone")["containers"][0]["pid"]
    ids = proc_ids(pid)
    assert ids["Uid"] == [u.pw_uid] * 4 and ids["Gid"] == [u.pw_gid] * 4
    assert grp.getgrnam(GROUP).gr_gid in ids["Groups"]  # its groups from the group database
    # a pod root ran for hwtest1 is hwtest1's: it lists it and reads its log
    assert box.pod("forone", "hwtest1") is not None
    log = until(lambda: (r := box.cli("hwtest1", "logs", "forone")).returncode == 0 and r.stdout.strip() and r,
                "hwtest1 to read the log")
    assert log.stdout.split() == [str(u.pw_uid)]
    for n in ("rootpod", "forone"):
        assert box.cli(None, "rm", n).returncode == 0


def test_a_member_runs_pods_as_itself_and_owns_their_logs(box):  # noqa: F811
    u = pwd.getpwnam("hwtest1")
    hwagent_gid = grp.getgrnam(GROUP).gr_gid
    sock = os.stat(box.root / "admission.sock")
    assert (sock.st_mode & 0o777, sock.st_uid, sock.st_gid) == (0o660, 0, hwagent_gid)
    r = box.cli("hwtest1", "launch", "--name", "mine", "--", "sh", "-c", "echo hello from $(id -un); sleep 600")
    assert r.returncode == 0, r.stderr
    pid = box.running("mine", "hwtest1")["containers"][0]["pid"]
    ids = proc_ids(pid)
    assert ids["Uid"] == [u.pw_uid] * 4 and ids["Gid"] == [u.pw_gid] * 4
    assert sorted(ids["Groups"]) == sorted(set(os.getgrouplist("hwtest1", u.pw_gid)))
    assert hwagent_gid in ids["Groups"]  # the supplementary group it connected with
    # the log directory and file are hwtest1's, owner-only; logs/ lets it pass, not list
    d = box.root / "logs" / "default_mine"
    st, f = os.stat(d), os.stat(d / "main.log")
    assert (st.st_uid, st.st_mode & 0o777) == (u.pw_uid, 0o700)
    assert (f.st_uid, f.st_gid, f.st_mode & 0o777) == (u.pw_uid, u.pw_gid, 0o600)
    assert os.stat(box.root / "logs").st_mode & 0o777 == 0o711
    r = until(lambda: (r := box.cli("hwtest1", "logs", "mine")).returncode == 0 and "hello" in r.stdout and r,
              "hwtest1 to read its log")
    assert r.stdout.strip() == "hello from hwtest1"
    # its own: stop and rm work, and nothing of it is left running
    assert box.cli("hwtest1", "stop", "mine", "--grace", "1").returncode == 0
    assert box.cli("hwtest1", "rm", "mine").returncode == 0
    assert box.pod("mine") is None and not os.path.exists(f"/proc/{pid}/status")


def test_exec_in_a_members_pod_runs_as_its_user_in_its_directory_and_environment(box):  # noqa: F811
    """Root's `hwagent exec` into hwtest1's pod drops to hwtest1 (its groups included), in the pod's
    working directory (hwtest1's home, where it launched) with the container's HOME/USER."""
    u = pwd.getpwnam("hwtest1")
    r = box.cli("hwtest1", "launch", "--name", "userexec", "-e", "MINE=1", "--", "sleep", "600")
    assert r.returncode == 0, r.stderr
    box.running("userexec", "hwtest1")
    e = box.cli(None, "exec", "userexec", "--", "sh", "-c", 'id -u; id -g; id -G; pwd; echo "$HOME $USER $MINE"')
    assert e.returncode == 0, e.stderr
    uid, gid, groups, cwd, env = e.stdout.splitlines()
    assert (int(uid), int(gid)) == (u.pw_uid, u.pw_gid)
    assert grp.getgrnam(GROUP).gr_gid in [int(g) for g in groups.split()]
    assert cwd == u.pw_dir and env == f"{u.pw_dir} hwtest1 1"
    assert box.cli(None, "rm", "userexec").returncode == 0
