"""Jobs as srun / docker run users expect them, on this machine's real cgroups and a real
daemon: run once, `--wait` with the job's exit code and output, OOMKilled, the caller's
directory and PATH, Ctrl-C, and the status `ps`/`describe` show (issue 23)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from agent.commands._exitcodes import EXIT_NO_DAEMON, EXIT_OOM, EXIT_REFUSED
from tests.integration.daemon.test_lifecycle import Daemon
from tests.integration.runtime.test_end_to_end import BUDGET_S, HWAGENT, pod, until
from tests.cgroup_support import kill_and_remove_subtree

pytestmark = pytest.mark.timeout(300)


#: a resource name that exists only in the module daemon's config file
CONFIG_ONLY_RESOURCE = "example.com/only-in-the-config"


class Job:
    """A daemon with the runtime on, over a test-owned cgroup subtree, shared by this module's tests."""

    def __init__(self, base: Path, subtree: str) -> None:
        self.subtree = subtree
        self.cfg = base / "hwagent.toml"
        # a resource rule only this file defines (devices off: the daemon serves nothing from it)
        # lets a command that reads the config show where it got it (test_without_config_...)
        self.cfg.write_text(f'[pressure]\nenabled = false\n[devices]\nenabled = false\n'
                            f'[[devices.resources]]\nname = "{CONFIG_ONLY_RESOURCE}"\nblock_name = ["loop*", "vd*"]\n'
                            f'[runtime]\ncgroup_subtree = "{subtree}"\n')
        self.root = base / "root"
        self.locks = base / "d" / "locks"  # Daemon's --lock-dir
        self.daemon = Daemon(base / "d", "--config", str(self.cfg), "--root-dir", str(self.root))
        until(lambda: "hwagent ready" in self.daemon.log(), "the daemon to be ready", self.daemon)

    def cli(self, *args: str, cwd: Path | None = None, timeout: float = BUDGET_S) -> subprocess.CompletedProcess:
        return subprocess.run([str(HWAGENT), args[0], "--root-dir", str(self.root), *args[1:]],
                              capture_output=True, text=True, timeout=timeout, cwd=cwd)

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([str(HWAGENT), args[0], "--root-dir", str(self.root), *args[1:]],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    from tests.integration.runtime.conftest import subtree_name

    subtree = subtree_name()
    j = Job(tmp_path_factory.mktemp("jobs"), subtree)
    try:
        yield j
    finally:
        j.daemon.stop()
        j.daemon.cleanup()
        kill_and_remove_subtree(subtree)


def test_wait_exits_with_the_jobs_exit_code(job):
    r = job.cli("launch", "--wait", "--name", "three", "--", "sh", "-c", "exit 3")
    assert r.returncode == 3, (r.stdout, r.stderr)
    p = pod(job.root, "three")
    assert p["phase"] == "Failed" and p["containers"][0]["restart_count"] == 0, p
    assert p["containers"][0]["reason"] == "Error" and p["containers"][0]["exit_code"] == 3, p


def test_wait_streams_output_runs_once_and_succeeds(job):
    r = job.cli("launch", "--wait", "--name", "hibye", "--", "sh", "-c", "echo hi; sleep 1; echo bye")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.splitlines() == ["hi", "bye"], r.stdout
    p = pod(job.root, "hibye")
    assert p["phase"] == "Succeeded", p
    c = p["containers"][0]
    assert (c["state"], c["reason"], c["restart_count"], c["exit_code"]) == ("terminated", "Completed", 0, 0), c
    ps = job.cli("ps")
    assert ps.returncode == 0, ps.stderr
    header, line = ps.stdout.splitlines()[0].split(), next(x for x in ps.stdout.splitlines() if "hibye" in x).split()
    assert "RESTARTS" in header and "AGE" in header and "STATUS" in header, header
    assert line[header.index("STATUS")] == "Completed" and line[header.index("RESTARTS")] == "0", ps.stdout
    # --quiet: the exit code without the output
    r = job.cli("launch", "--wait", "--quiet", "--rm", "--name", "quiet", "--", "sh", "-c", "echo loud; exit 4")
    assert r.returncode == 4 and "loud" not in r.stdout, (r.stdout, r.stderr)
    assert pod(job.root, "quiet") is None  # --rm: gone once it ended


def test_memory_hog_is_oomkilled(job):
    r = job.cli("launch", "--wait", "--name", "hog", "--memory", "32Mi", "--",
                "sh", "-c", "head -c 400000000 /dev/zero | tail")
    assert r.returncode == EXIT_OOM, (r.stdout, r.stderr)
    assert "OOMKilled" in r.stderr, r.stderr
    p = pod(job.root, "hog")
    assert p["containers"][0]["reason"] == "OOMKilled", p
    ps = job.cli("ps")
    assert "OOMKilled" in next(x for x in ps.stdout.splitlines() if "hog" in x), ps.stdout
    d = job.cli("describe", "hog")
    assert d.returncode == 0 and "OOMKilled" in d.stdout, d.stdout


def test_script_in_the_callers_directory_runs_there_with_its_env(job, tmp_path):
    script = tmp_path / "train.sh"
    script.write_text('#!/bin/sh\necho "in $(pwd) lr=$LR epochs=$EPOCHS"\n')
    script.chmod(0o755)
    (tmp_path / "job.env").write_text("# comment\nEPOCHS=7\n")
    r = job.cli("launch", "--wait", "--name", "train", "--env", "LR=0.1", "--env-file", "job.env", "--",
                "./train.sh", cwd=tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.strip() == f"in {tmp_path} lr=0.1 epochs=7", r.stdout


def test_missing_command_or_directory_is_refused_before_anything_is_allocated(job, tmp_path):
    r = job.cli("launch", "--name", "nocmd", "--", "./no-such-script.sh", cwd=tmp_path)
    assert r.returncode == EXIT_REFUSED and "./no-such-script.sh" in r.stderr, r.stderr
    assert pod(job.root, "nocmd") is None
    r = job.cli("launch", "--name", "nodir", "--workdir", str(tmp_path / "gone"), "--", "true")
    assert r.returncode == EXIT_REFUSED and "gone" in r.stderr and "does not exist" in r.stderr, r.stderr
    assert pod(job.root, "nodir") is None
    # a manifest the daemon refuses at admission, not at start
    m = tmp_path / "pod.json"
    m.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "mwd"}, "spec": {
        "containers": [{"name": "main", "command": ["true"], "workingDir": str(tmp_path / "gone")}]}}))
    r = job.cli("admit", "-f", str(m))
    assert r.returncode == EXIT_REFUSED and "workingDir" in r.stderr and "does not exist" in r.stderr, r.stderr
    assert "INVALID_ARGUMENT" not in r.stderr, r.stderr  # no raw gRPC status on the terminal
    assert pod(job.root, "mwd") is None


def test_ctrl_c_reports_then_a_second_one_within_a_second_stops_the_pod(job):
    proc = job.popen("launch", "--wait", "--name", "intr", "--", "sleep", "600")
    try:
        until(lambda: (q := pod(job.root, "intr")) and q["phase"] == "Running" and q, "the job to run")
        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "intr" in line and "Running" in line and "within 1 s" in line, line
        assert proc.poll() is None and pod(job.root, "intr")["phase"] == "Running"
        # the second press: within a second of the one the CLI last saw (a loaded machine may
        # delay the CLI past the second: then it reports again, and the test presses again)
        deadline = time.monotonic() + BUDGET_S
        while proc.poll() is None and time.monotonic() < deadline:
            proc.send_signal(signal.SIGINT)
            line = proc.stderr.readline()
            if "stopping" in line:
                break
        out, err = proc.communicate(timeout=BUDGET_S)
        assert proc.returncode == 128 + signal.SIGTERM, (line, out, err)
        p = pod(job.root, "intr")
        assert p["phase"] == "Failed" and p["reason"] == "Stopped", p
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_without_config_or_root_dir_the_cli_finds_the_running_daemon(job, tmp_path):
    """The daemon owns its config: its claim names its root dir and config file, and the CLI, given
    neither --config nor --root-dir, talks to it (here on a root dir no default names)."""
    env = {**os.environ, "HWAGENT_LOCK_DIR": str(job.locks)}
    run = subprocess.run([str(HWAGENT), "launch", "--wait", "--name", "found", "--", "sh", "-c", "exit 3"],
                         capture_output=True, text=True, timeout=BUDGET_S, cwd=tmp_path, env=env)
    assert run.returncode == 3, run.stderr
    ps = subprocess.run([str(HWAGENT), "ps"], capture_output=True, text=True, timeout=BUDGET_S, env=env)
    assert ps.returncode == 0 and "found" in ps.stdout, ps.stderr
    status = subprocess.run([str(HWAGENT), "status", "--format", "json"], capture_output=True, text=True,
                            timeout=BUDGET_S, env=env)
    assert status.returncode == 0, status.stderr
    # a command that reads the config applies the daemon's file: its resource rule, defined nowhere else
    devices = subprocess.run([str(HWAGENT), "devices", "--format", "json"], capture_output=True, text=True,
                             timeout=BUDGET_S, env=env)
    assert devices.returncode == 0, devices.stderr
    offered = {d["resource"] for d in json.loads(devices.stdout)["devices"]}
    assert CONFIG_ONLY_RESOURCE in offered, offered
    bare = subprocess.run([str(HWAGENT), "devices", "--format", "json"], capture_output=True, text=True,
                          timeout=BUDGET_S, env={**env, "HWAGENT_LOCK_DIR": str(tmp_path / "no-daemons")})
    assert bare.returncode == 0, bare.stderr
    assert CONFIG_ONLY_RESOURCE not in {d["resource"] for d in json.loads(bare.stdout)["devices"]}, \
        "with no daemon running the embedded defaults apply"
    assert job.cli("rm", "found").returncode == 0


def test_rm_without_wait_is_removed_by_the_daemon_when_it_ends(job):
    """`launch --rm` without --wait: the CLI returns at once and the daemon removes the pod when it ends."""
    from agent.commands.launch import REMOVE_ON_EXIT as cli_key
    from agent.workloads.autoremove import REMOVE_ON_EXIT

    assert cli_key == REMOVE_ON_EXIT
    r = job.cli("launch", "--rm", "--name", "gone", "--", "sh", "-c", "sleep 1; exit 4")
    assert r.returncode == 0, r.stderr
    assert "gone" in job.cli("ps").stdout, "admitted and listed while it runs"

    def absent() -> bool:
        ps = job.cli("ps", "--format", "json")
        return ps.returncode == 0 and all(p["name"] != "gone" for p in json.loads(ps.stdout)["pods"])

    until(absent, "the daemon to remove the ended pod", job.daemon)
    assert "pod removed on exit" in job.daemon.log()
    r = job.cli("launch", "--rm", "-f", "/dev/null")
    assert r.returncode == 2 and "--wait" in r.stderr and "remove-on-exit" in r.stderr, r.stderr


def test_wait_rm_whose_reader_went_away_still_removes_the_pod(job):
    """`launch --wait --rm -- cmd | head -1`: the output's reader is gone long before the job ends;
    the CLI stops streaming, waits for the end as before, removes the pod and exits quietly."""
    proc = job.popen("launch", "--wait", "--rm", "--name", "piped", "--", "sh", "-c", "seq 1 200000; sleep 1")
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == "1\n"
    proc.stdout.close()  # as `head -1` does
    err = proc.stderr.read()
    assert proc.wait(BUDGET_S) == 0, err
    assert "Traceback" not in err, err

    def absent() -> bool:
        ps = job.cli("ps", "--format", "json")
        return ps.returncode == 0 and all(p["name"] != "piped" for p in json.loads(ps.stdout)["pods"])

    assert absent(), "--rm removed the pod once it ended, reader or not"


def test_the_daemon_not_running_is_said_with_what_to_do(tmp_path):
    r = subprocess.run([str(HWAGENT), "ps", "--root-dir", str(tmp_path)], capture_output=True, text=True,
                       timeout=BUDGET_S)
    assert r.returncode == EXIT_NO_DAEMON, r.stderr
    assert "the daemon is not running" in r.stderr and "hwagent run" in r.stderr, r.stderr


def test_stop_takes_several_names_and_cpus_a_fraction(job):
    """What a docker user types: `launch --cpus 0.5` (request = limit = 500m, a CFS quota of half a
    period) and `stop A B`, each stopped in turn, a missing one reported without sparing the others."""
    for name in ("half", "other"):
        r = job.cli("launch", "--name", name, "--cpus", "0.5", "--", "sleep", "600")
        assert r.returncode == 0, r.stderr
    until(lambda: all((q := pod(job.root, n)) and q["phase"] == "Running" for n in ("half", "other")),
          "both to run")
    d = job.cli("describe", "half", "--format", "json")
    assert d.returncode == 0, d.stderr
    dirs = json.loads(d.stdout)["cgroup_dirs"]  # the pod's, one per hierarchy; its container is main
    cpu = Path(next(x for x in dirs if x.startswith(("/sys/fs/cgroup/cpu/", "/sys/fs/cgroup/cpu,cpuacct/")))) / "main"
    quota, period = int((cpu / "cpu.cfs_quota_us").read_text()), int((cpu / "cpu.cfs_period_us").read_text())
    assert quota * 2 == period, ("half a period per period", quota, period)
    r = job.cli("stop", "half", "nosuch", "other", "--grace", "0")
    assert r.returncode != 0, (r.stdout, r.stderr)
    assert "nosuch" in r.stderr and r.stdout.count("stopped ") == 2, (r.stdout, r.stderr)
    until(lambda: all(pod(job.root, n)["phase"] in ("Succeeded", "Failed") for n in ("half", "other")),
          "both to stop")
    assert job.cli("rm", "half", "other").returncode == 0
