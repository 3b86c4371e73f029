"""Who may read what the daemon knows about who runs what (issue 32 item 7).

mallory (in no group) and alice (a socket-group member) against a real daemon with the
advisor, pressure and DRA on: every file under the root dir that is not a user's own is closed to
them (the tree is walked: nothing world-readable but an allow-list, each entry with its
reason), the advisor's decisions and the DRA claim files cannot be read, ``hwagent explain``
refuses them with a permission message, and the metrics endpoint (loopback, where any local
user reaches it) names no pod unless the operator turns per-pod series on.

Before the fix: mallory read ``<root>/advisor/decisions.jsonl`` (0644 in a 0755 dir), the DRA
claim files (0644), listed the root dir, and ``hwagent explain`` printed the pool for her."""

from __future__ import annotations

import os
import pwd
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.support import ALICE, MALLORY, Box, as_user, security_box, until

pytestmark = [pytest.mark.timeout(600), pytest.mark.root]

#: paths under the root dir (relative) that others may read, and why
READABLE_BY_OTHERS = {
    "hwagent.pid": "the daemon's pid, which `ps` shows anyone",
}
#: paths under the root dir whose group may read or write them (the socket group), and why
GROUP_FACING = {
    "cli.sock": "the CLI's API: the socket group's members launch through it",
    "admission.sock": "the admission API: the socket group's members admit through it",
}

CLAIM = ("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: disk, namespace: default}\n"
         "spec:\n  devices:\n    requests:\n    - name: one\n      exactly: {deviceClassName: scratch.example.com}\n")


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    yield from security_box(config={"advisor": {"enabled": "true"}, "pressure": {"enabled": "true"}})


@pytest.fixture(scope="module")
def busy(box: Box) -> Iterator[str]:
    """A pod of root's with a name that must not leak, busy enough to show in run-queue series,
    and a decision or two from the advisor."""
    name = "rootsecretjob"
    r = box.cli(None, "launch", "--name", name, "--", "/usr/bin/python3", "-S", "-c", "while True: pass")
    assert r.returncode == 0, r.stderr
    box.running(name)
    until(lambda: (box.root / "advisor" / "decisions.jsonl").exists(), "an advisor decision", box.daemon)
    # a claim file as an operator writes one (with the usual umask)
    d = box.root / "dra"
    d.mkdir(exist_ok=True)
    (d / "disk.yaml").write_text(CLAIM)
    yield name
    box.cli(None, "rm", name)


def _metrics_address(box: Box) -> str:
    m = re.search(r'msg="metrics endpoint listening" address=(\S+)', box.daemon.log())
    assert m, box.daemon.log()
    return m.group(1)


def _scrape_as(user: str, address: str) -> str:
    r = as_user(user, "/usr/bin/python3", "-S", "-c",
                f"import urllib.request; print(urllib.request.urlopen('http://{address}/metrics', timeout=30)"
                ".read().decode())")
    assert r.returncode == 0, r.stderr
    return r.stdout


def _walk(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            yield str(p.relative_to(root)), os.lstat(p)


def _may(st: os.stat_result, uid: int, gids: set[int], what: int) -> bool:
    """Whether a process of ``uid`` with ``gids`` has access ``what`` (4 read, 1 pass) by the mode bits."""
    shift = 6 if st.st_uid == uid else 3 if st.st_gid in gids else 0
    return bool((st.st_mode >> shift) & what)


def test_state_under_the_root_dir_is_closed_to_other_users(box: Box, busy: str) -> None:
    time.sleep(2)  # a few more decisions and records written after start
    operators = {"dra/disk.yaml"}  # written by the test as an operator would (umask 022), after start
    bad = []
    entries = dict(_walk(box.root))
    for rel, st in entries.items():
        mode = stat.S_IMODE(st.st_mode)
        if rel.split("/")[0] == "logs" and st.st_uid != 0:
            continue  # a user's own log directory and files (tests/integration/runtime/test_users.py)
        # what the daemon wrote, by its mode alone: nothing world-readable, no group but root's
        if mode & stat.S_IROTH and rel not in READABLE_BY_OTHERS and rel not in operators:
            bad.append(f"{rel} {oct(mode)} readable by anyone")
        if mode & (stat.S_IRGRP | stat.S_IWGRP) and st.st_gid != 0 and rel not in GROUP_FACING:
            bad.append(f"{rel} {oct(mode)} gid {st.st_gid}: its group may read it")
        # and what each user can reach in fact: every directory on the way passable, the entry readable
        for user in (MALLORY, ALICE):
            pw = pwd.getpwnam(user)
            gids = set(os.getgrouplist(user, pw.pw_gid))
            parts = rel.split("/")
            way = [os.stat(box.root)] + [entries["/".join(parts[:i])] for i in range(1, len(parts))]
            if all(_may(d, pw.pw_uid, gids, 1) for d in way) and _may(st, pw.pw_uid, gids, 4) \
                    and rel not in READABLE_BY_OTHERS and rel not in GROUP_FACING:
                bad.append(f"{rel} {oct(mode)}: {user} can read it")
    assert not bad, "\n".join(bad)
    root_mode = stat.S_IMODE(os.stat(box.root).st_mode)
    assert not root_mode & (stat.S_IRGRP | stat.S_IROTH), oct(root_mode)  # nobody lists it


@pytest.mark.parametrize("user", [MALLORY, ALICE])
def test_decisions_claims_and_listing_are_refused(box: Box, busy: str, user: str) -> None:
    probe = ("import sys\n"
             "for p in sys.argv[1:]:\n"
             "    try:\n"
             "        open(p).read() if not p.endswith('/') else __import__('os').listdir(p)\n"
             "        print(p, 'read')\n"
             "    except PermissionError:\n"
             "        print(p, 'denied')\n")
    paths = [box.root / "advisor" / "decisions.jsonl", box.root / "dra" / "disk.yaml"]
    assert all(p.exists() for p in paths)
    r = as_user(user, "/usr/bin/python3", "-S", "-c", probe, *map(str, paths), f"{box.root}/")
    assert r.returncode == 0, r.stderr
    assert [line.rsplit(" ", 1)[1] for line in r.stdout.splitlines()] == ["denied"] * 3, r.stdout


@pytest.mark.parametrize("user", [MALLORY, ALICE])
def test_explain_is_refused_with_a_permission_message(box: Box, busy: str, user: str) -> None:
    for args in ((), (busy,)):
        r = box.cli(user, "explain", *args)
        assert r.returncode != 0, r.stdout
        assert "permission denied" in r.stderr and "root" in r.stderr, r.stderr
        assert busy not in r.stdout + r.stderr
    r = box.cli(None, "explain")
    assert r.returncode == 0 and "shared pool" in r.stdout, r.stdout + r.stderr


def test_metrics_name_no_pod_by_default(box: Box, busy: str) -> None:
    address = _metrics_address(box)
    assert address.startswith("127.0.0.1:")
    until(lambda: 'hwagent_pressure_probes_state{state="running"} 1.0' in _scrape_as(MALLORY, address),
          "the pressure probes to run", box.daemon)
    time.sleep(3)  # a few intervals of run-queue samples of the busy pod
    text = _scrape_as(MALLORY, address)
    assert busy not in text
    assert not [line for line in text.splitlines() if not line.startswith("#") and 'pod="' in line]
