"""`hwagent exec NAME [-c C] -- CMD` on a real daemon with the runtime on (issue 23): the
command runs in the container's cgroups (so on its CPUs), with its stdio and exit status."""

from __future__ import annotations

import json

import pytest

from tests.integration.runtime.test_end_to_end import until
from tests.integration.runtime.test_jobs import job  # noqa: F401 - the module's daemon
from tests.integration.runtime.test_signal_describe import _running

pytestmark = pytest.mark.timeout(300)


def _described(j, name: str) -> dict:
    d = j.cli("describe", name, "--format", "json")
    assert d.returncode == 0, d.stderr
    return json.loads(d.stdout)


def test_exec_joins_the_containers_cgroups_cpus_and_exit_status(job):  # noqa: F811
    r = job.cli("launch", "--name", "ex", "--", "sleep", "600")
    assert r.returncode == 0, r.stderr
    _running(job, "ex")
    p = until(lambda: (q := _described(job, "ex")) and q["containers"][0]["pids"] and q, "the container's pid")
    c = p["containers"][0]
    e = job.cli("exec", "ex", "--", "cat", "/proc/self/cgroup")
    assert e.returncode == 0, e.stderr
    lines = e.stdout.splitlines()
    # every hierarchy the kernel lists for the exec'd process is the container's own cgroup
    assert lines and all(line.split(":", 2)[2] == c["cgroup"] for line in lines if ":cpuset:" in line
                         or line.startswith("0::")), e.stdout
    assert any(":cpuset:" in line and line.endswith(c["cgroup"]) for line in lines), e.stdout
    e = job.cli("exec", "ex", "-c", "main", "--", "sh", "-c", "grep Cpus_allowed_list /proc/self/status")
    assert e.returncode == 0, e.stderr
    mine = open(f"/proc/{c['pids'][0]}/status").read()
    want = next(x for x in mine.splitlines() if x.startswith("Cpus_allowed_list"))
    assert e.stdout.strip() == want, (e.stdout, want)
    e = job.cli("exec", "ex", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert e.returncode == 7 and e.stdout == "out\n" and e.stderr == "err\n", e
    job.cli("stop", "ex", "--grace", "0")


def test_exec_refusals_say_what_to_do(job):  # noqa: F811
    r = job.cli("exec", "nosuchpod", "--", "true")
    assert r.returncode == 3 and "nosuchpod" in r.stderr and "hwagent ps" in r.stderr, r.stderr
    job.cli("launch", "--name", "exbad", "--", "sleep", "600")
    _running(job, "exbad")
    r = job.cli("exec", "exbad", "-c", "nosuch", "--", "true")
    assert r.returncode == 3 and "nosuch" in r.stderr and "main" in r.stderr, r.stderr
    r = job.cli("exec", "exbad")
    assert r.returncode == 2 and "CMD" in r.stderr, r.stderr
    job.cli("stop", "exbad", "--grace", "0")
    until(lambda: _described(job, "exbad")["phase"] in ("Succeeded", "Failed"), "the pod to end")
    r = job.cli("exec", "exbad", "--", "true")
    assert r.returncode == 1 and "runs nothing" in r.stderr, r.stderr
