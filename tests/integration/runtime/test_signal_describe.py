"""`hwagent signal`, `describe`'s cgroups and pids, and the CLI API's long-poll wait, on a real
daemon with the runtime on over this machine's cgroups (issue 23)."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.runtime.test_end_to_end import BUDGET_S, pod, until
from tests.integration.runtime.test_jobs import job  # noqa: F401 - the module's daemon

pytestmark = pytest.mark.timeout(300)


def _get(sock: Path, target: str, timeout: float = BUDGET_S) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("localhost", timeout=timeout)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(str(sock))
    conn.sock = s
    try:
        conn.request("GET", target)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def _running(j, name: str) -> dict[str, Any]:
    return until(lambda: (q := pod(j.root, name)) and q["phase"] == "Running" and q, f"{name} to run")


def test_sigterm_to_sleep_ends_the_pod_with_exit_143(job):  # noqa: F811
    r = job.cli("launch", "--name", "sigterm", "--", "sleep", "600")
    assert r.returncode == 0, r.stderr
    _running(job, "sigterm")
    s = job.cli("signal", "sigterm", "TERM")
    assert s.returncode == 0, (s.stdout, s.stderr)
    assert "SIGTERM" in s.stdout and "main" in s.stdout, s.stdout
    p = until(lambda: (q := pod(job.root, "sigterm")) and q["phase"] in ("Succeeded", "Failed") and q,
              "the pod to end")
    c = p["containers"][0]
    assert p["phase"] == "Failed" and c["reason"] == "Error" and c["exit_code"] == 128 + signal.SIGTERM, p
    assert c["restart_count"] == 0, p


def test_sigusr1_by_number_reaches_a_trap_script(job):  # noqa: F811
    script = "trap 'echo got-usr1' USR1; echo ready; while :; do sleep 0.2; done"
    r = job.cli("launch", "--name", "trap", "--", "sh", "-c", script)
    assert r.returncode == 0, r.stderr
    _running(job, "trap")
    until(lambda: "ready" in job.cli("logs", "trap").stdout, "the trap to be set")
    s = job.cli("signal", "trap", str(int(signal.SIGUSR1)), "-c", "main")
    assert s.returncode == 0, (s.stdout, s.stderr)
    until(lambda: "got-usr1" in job.cli("logs", "trap").stdout, "the trap's line in the log")
    assert pod(job.root, "trap")["phase"] == "Running"
    job.cli("stop", "trap", "--grace", "0")


def test_signal_refusals_say_what_to_do(job):  # noqa: F811
    r = job.cli("signal", "nosuchpod", "TERM")
    assert r.returncode != 0 and "nosuchpod" in r.stderr and "hwagent ps" in r.stderr, r.stderr
    job.cli("launch", "--name", "sigbad", "--", "sleep", "600")
    _running(job, "sigbad")
    r = job.cli("signal", "sigbad", "NOTASIGNAL")
    assert r.returncode != 0 and "NOTASIGNAL" in r.stderr, r.stderr
    r = job.cli("signal", "sigbad", "TERM", "-c", "nosuch")
    assert r.returncode != 0 and "nosuch" in r.stderr and "main" in r.stderr, r.stderr
    assert pod(job.root, "sigbad")["phase"] == "Running"  # a refused signal changed nothing
    job.cli("stop", "sigbad", "--grace", "0")


def test_describe_shows_cgroup_paths_and_live_pids(job):  # noqa: F811
    r = job.cli("launch", "--name", "desc", "--", "sh", "-c", "sleep 600 & wait")
    assert r.returncode == 0, r.stderr
    _running(job, "desc")
    d = job.cli("describe", "desc", "--format", "json")
    assert d.returncode == 0, d.stderr
    p = json.loads(d.stdout)
    assert p["cgroup"].endswith(f"/pod{p['uid']}"), p["cgroup"]
    assert p["cgroup_dirs"] and all(Path(x).is_dir() for x in p["cgroup_dirs"]), p["cgroup_dirs"]
    c = p["containers"][0]
    assert c["cgroup"] == f"{p['cgroup']}/main", c
    # sh and its sleep, read from cgroup.procs now: each lives in the container's cgroup
    assert len(c["pids"]) >= 2, c
    for pid in c["pids"]:
        assert c["cgroup"] in Path(f"/proc/{pid}/cgroup").read_text(), pid
    text = job.cli("describe", "desc")
    assert text.returncode == 0, text.stderr
    assert f"cgroup: {p['cgroup']}" in text.stdout, text.stdout
    assert f"cgroup {c['cgroup']}" in text.stdout and str(c["pids"][0]) in text.stdout, text.stdout
    job.cli("stop", "desc", "--grace", "0")
    ended = until(lambda: (q := json.loads(job.cli("describe", "desc", "--format", "json").stdout))
                  and q["phase"] in ("Succeeded", "Failed") and q, "the pod to end")
    assert ended["containers"][0]["pids"] == [], ended  # asked at answer time, not stored


def test_long_poll_answers_when_the_pod_ends_or_the_timeout_passes(job):  # noqa: F811
    sock = job.root / "cli.sock"
    r = job.cli("launch", "--name", "lp", "--", "sleep", "600")
    assert r.returncode == 0, r.stderr
    _running(job, "lp")
    t0 = time.monotonic()
    status, body = _get(sock, "/v1/pods/default/lp?wait=terminal&timeout=1")
    assert status == 200 and body["pod"]["phase"] == "Running", body
    assert time.monotonic() - t0 >= 0.9  # it waited for the timeout, not answered at once
    status, body = _get(sock, "/v1/pods/default/lp?wait=nonsense")
    assert status == 400 and "wait" in body["message"], body
    # a stop from elsewhere ends the wait at once, long before its timeout
    stopper = job.popen("stop", "lp", "--grace", "0")
    try:
        t0 = time.monotonic()
        status, body = _get(sock, f"/v1/pods/default/lp?wait=terminal&timeout={BUDGET_S}", timeout=BUDGET_S + 30)
        assert status == 200 and body["pod"]["phase"] == "Failed", body
        assert time.monotonic() - t0 < BUDGET_S
    finally:
        stopper.communicate(timeout=BUDGET_S)
