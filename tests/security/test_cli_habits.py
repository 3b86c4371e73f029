"""Issue 37: what a user of the CLI meets, tried as real users against a real daemon.

``hwagent logs`` reads the pod's log files directly (it works with the daemon down). Another
user's pod must read exactly as a pod that does not exist: "cannot read ...: Permission
denied" told mallory that alice's pod is there, and a missing pod exited 2 (usage) where the
table of docs/commands/README.md says 3.

And what docker users type (item 6), as a member of the socket group types it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.security.support import ALICE, MALLORY, Box, as_user, home, security_box, write_as
from tests.users_support import HWAGENT


#: a resource rule only the daemon's config file defines (devices off: the daemon serves nothing from it)
ONLY_IN_CONFIG = "example.com/only-in-the-config"


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    yield from security_box(config={"devices": {
        "resources": f'[{{name = "{ONLY_IN_CONFIG}", block_name = ["loop*", "vd*", "zram*"]}}]'}})


def test_another_users_pod_reads_as_no_pod_in_logs(box: Box) -> None:
    r = box.cli(ALICE, "launch", "--name", "secretjob", "--", "sh", "-c", "echo hidden; sleep 600")
    assert r.returncode == 0, r.stderr
    try:
        theirs = box.cli(MALLORY, "logs", "secretjob")
        missing = box.cli(MALLORY, "logs", "nosuchjob")
        assert missing.returncode == 3, missing.stderr
        assert theirs.returncode == 3 and "hidden" not in theirs.stdout, (theirs.returncode, theirs.stderr)
        assert "no pod default/secretjob" in theirs.stderr and "Permission denied" not in theirs.stderr
        # the same words for both: nothing tells the two apart but the name
        assert theirs.stderr.replace("secretjob", "X") == missing.stderr.replace("nosuchjob", "X")
    finally:
        box.cli(None, "rm", "secretjob")


def test_docker_habits_as_a_member(box: Box) -> None:
    """Issue 37 item 6, as alice types them: global options first, ``ps -aq``, ``stop -t``,
    ``rm -f $(hwagent ps -aq)`` across namespaces, ``version``."""
    for name, ns in (("habit1", "default"), ("habit2", "team")):
        r = box.cli(ALICE, "launch", "-d", "-m", "64Mi", "--namespace", ns, "--name", name, "--", "sleep", "600")
        assert r.returncode == 0, r.stderr
    root = str(box.root)
    first = as_user(ALICE, str(HWAGENT), "--root-dir", root, "ps", "-aq")
    assert first.returncode == 0, first.stderr
    assert sorted(first.stdout.split()) == ["habit1", "team/habit2"], first.stdout
    r = as_user(ALICE, str(HWAGENT), "--root-dir", root, "stop", "-t", "1", "team/habit2")
    assert r.returncode == 0 and "stopped team/habit2" in r.stdout, r.stderr
    r = as_user(ALICE, str(HWAGENT), "--root-dir", root, "rm", "-f", *first.stdout.split())
    assert r.returncode == 0, r.stderr
    assert box.cli(ALICE, "ps", "-q").stdout == ""
    r = as_user(ALICE, str(HWAGENT), "version")
    assert r.returncode == 0 and r.stdout.startswith("hwagent "), r.stderr


def test_a_kubectl_written_manifest_launches_with_one_line_saying_what_was_ignored(box: Box) -> None:
    """Issue 37 item 7: `kubectl run --dry-run=client -o yaml` output was refused for image:."""
    from tests.unit.workloads.test_manifest import KUBECTL_RUN

    text = KUBECTL_RUN.replace("/bin/sleep", "/bin/echo").replace("web", "kube1")
    path = write_as(ALICE, home(ALICE) / "kube1.yaml", text)
    r = box.cli(ALICE, "launch", "-f", str(path), "--wait", "--rm")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "60\n", r.stdout
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "spec.containers[0].image" in warnings[0] and "status" in warnings[0], r.stderr
    # what would change what runs is still refused, naming the field
    bad = write_as(ALICE, home(ALICE) / "kube2.yaml",
                   text.replace("kube1", "kube2").replace("    resources: {}\n", "    resources: {}\n    volumeMounts: []\n"))
    r = box.cli(ALICE, "launch", "-f", str(bad))
    assert r.returncode == 1 and "spec.containers[0].volumeMounts: unknown field" in r.stderr, r.stderr


@pytest.mark.parametrize("user", [None, ALICE])
def test_offline_commands_read_the_running_daemons_config(box: Box, user: str | None) -> None:
    """Issue 37 item 14: `hwagent devices` without --config, with a daemon started with --config F,
    listed F's devices as "not offered"; root and a member of the socket group both ask."""
    import json
    import os
    import subprocess

    env = {**os.environ, "HWAGENT_LOCK_DIR": str(box.daemon.root.parent / "locks")}
    argv = [str(HWAGENT), "devices", "--format", "json"]
    r = (as_user(user, *argv, env=env) if user else
         subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd="/"))
    assert r.returncode == 0, r.stderr
    offered = {d["resource"] for d in json.loads(r.stdout)["devices"]}
    assert ONLY_IN_CONFIG in offered, (offered, r.stderr)



def test_a_daemon_config_the_user_cannot_read_says_whose_it_is(box: Box) -> None:
    import os

    cfg = box.daemon.root.parent.parent / "hwagent.toml"
    env = {**os.environ, "HWAGENT_LOCK_DIR": str(box.daemon.root.parent / "locks")}
    os.chmod(cfg, 0o600)
    try:
        r = as_user(ALICE, str(HWAGENT), "devices", env=env)
    finally:
        os.chmod(cfg, 0o644)
    assert r.returncode == 2, r.stderr
    assert "Permission denied" in r.stderr and f"the config of the daemon running on {box.root}" in r.stderr \
        and "--config FILE" in r.stderr, r.stderr


def test_exec_t_passes_the_callers_term(box: Box) -> None:
    """Issue 37 item 12: `exec -t` gave the command the container's TERM (none, or dumb): full-screen
    programs then draw nothing. docker exec -t passes the caller's; -e TERM=... still wins."""
    import os
    import subprocess
    import time

    from tests.integration.runtime.test_end_to_end import BUDGET_S
    from tests.security.test_exec_terminal import _read_until

    r = box.cli(ALICE, "launch", "--name", "termpod", "-e", "TERM=dumb", "--", "sleep", "600")
    assert r.returncode == 0, r.stderr
    try:
        for extra, want in (([], b"T=xterm-256color."), (["-e", "TERM=vt100"], b"T=vt100.")):
            master, slave = os.openpty()
            proc = subprocess.Popen(["setsid", "-c", str(HWAGENT), "exec", "--root-dir", str(box.root), "-t", *extra,
                                     "termpod", "--", "sh", "-c", 'echo "T=$TERM."'],
                                    stdin=slave, stdout=slave, stderr=slave,
                                    env={**os.environ, "TERM": "xterm-256color"})
            try:
                out = _read_until(master, want, time.monotonic() + BUDGET_S)
                assert proc.wait(BUDGET_S) == 0, out
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                os.close(master)
                os.close(slave)
    finally:
        box.cli(None, "rm", "termpod")


def test_an_env_file_with_export_lines(box: Box) -> None:
    """Issue 37 item 12: `export C=3` was refused as "spec.containers[0].env[2].name"."""
    f = write_as(ALICE, home(ALICE) / "vars.env", "A=1\nB=2\nexport C=3\n")
    r = box.cli(ALICE, "launch", "--env-file", str(f), "--wait", "--rm", "--", "sh", "-c", 'echo "$A$B$C"')
    assert r.returncode == 0 and r.stdout == "123\n", (r.stdout, r.stderr)
    bad = write_as(ALICE, home(ALICE) / "bad.env", "A=1\nexport B C=3\n")
    r = box.cli(ALICE, "launch", "--env-file", str(bad), "--", "true")
    assert r.returncode == 2 and f"--env-file {bad}:2: 'B C': not a valid variable name" in r.stderr, r.stderr


def test_probes_names_the_daemons_pods(box: Box) -> None:
    """Issue 37 item 12: `hwagent probes` rows by cgroup path and UID; the names come from the daemon."""
    import json
    from types import SimpleNamespace

    from agent.commands.probes import pod_names
    from agent.pressure.view import pod_of

    r = box.cli(ALICE, "launch", "--name", "probed", "--", "sleep", "600")
    assert r.returncode == 0, r.stderr
    try:
        pod = json.loads(box.cli(None, "describe", "probed", "--format", "json").stdout)
        names = pod_names(SimpleNamespace(config=None, root_dir=str(box.root)))
        assert names[pod["uid"]] == "default/probed", names
        assert pod_of(pod["containers"][0]["cgroup"], names) == "default/probed main"
        assert pod_names(SimpleNamespace(config=None, root_dir=str(box.root / "nowhere"))) == {}
    finally:
        box.cli(None, "rm", "probed")
