"""The runtime on this machine's hybrid cgroups, with real processes, as root."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from agent.runtime.config import RuntimeConfig
from agent.contracts.pods import QOS_DEDICATED, QOS_RECLAIMED, ContainerState, PodPhase

from .conftest import FAST, make_pod

pytestmark = pytest.mark.timeout(120)

terminal = lambda s: s.phase.terminal  # noqa: E731


def run(coro):
    return asyncio.run(coro)


def read_log(env, pod, container="main") -> str:
    return (env.root / "logs" / f"default_{pod.spec.name}" / f"{container}.log").read_text()


def test_workload_sees_its_cpus_and_memory_nodes(env):
    async def go():
        rt = env.runtime()
        cpus = "1" if os.cpu_count() and os.cpu_count() > 1 else "0"
        pod = make_pod("pinned", ["grep", "-E", "Cpus_allowed_list|Mems_allowed_list", "/proc/self/status"],
                       qos=QOS_DEDICATED, cpus=cpus, mems="0")
        await rt.run(pod)
        st = await env.sink.wait(pod.uid, terminal)
        assert st.phase == PodPhase.SUCCEEDED, st
        fields = dict(line.split(":\t") for line in read_log(env, pod).splitlines())
        assert fields["Cpus_allowed_list"] == cpus
        assert fields["Mems_allowed_list"] == "0"
        assert env.dirs() == []

    run(go())


@pytest.mark.parametrize("shim", ["c", "python"])
def test_process_is_in_its_cgroups_before_it_runs(env, shim):
    async def go():
        rt = env.runtime(RuntimeConfig(**{**vars(FAST), "shim": ""}))
        if shim == "python":  # the fallback when gcc was missing at set-up
            import sys

            from agent.runtime import shim as py_shim

            rt.shim = [sys.executable, "-S", py_shim.__file__]
        else:
            assert rt.shim[0].endswith("hwagent-shim"), rt.shim
        pod = make_pod("where", ["cat", "/proc/self/cgroup"])
        await rt.run(pod)
        await env.sink.wait(pod.uid, terminal)
        lines = read_log(env, pod).splitlines()
        want = f"{env.subtree}/pod{pod.uid}/main"
        for ctl in ("cpuset", "cpu", "cpuacct", "memory", "devices", "pids"):
            assert any(line.split(":", 2)[1].split(",").count(ctl) and line.endswith(want) for line in lines), (ctl, lines)
        assert any(line.startswith("0::") and line.endswith(want) for line in lines)

    run(go())


@pytest.mark.parametrize("shim", ["c", "python"])
def test_a_container_starts_with_default_signals_whatever_the_daemon_inherited(env, shim):
    """A daemon started from a script's background job has SIGINT and SIGQUIT ignored; an
    ignored signal survives exec, so without the shim's reset `hwagent signal NAME INT` (or a
    shell's INT trap) would do nothing in its containers."""
    import signal
    import sys

    async def go():
        rt = env.runtime(RuntimeConfig(**{**vars(FAST), "shim": ""}))
        if shim == "python":
            from agent.runtime import shim as py_shim

            rt.shim = [sys.executable, "-S", py_shim.__file__]
        pod = make_pod("sigs", ["grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"])
        await rt.run(pod)
        await env.sink.wait(pod.uid, terminal)
        return dict(line.split(":\t") for line in read_log(env, pod).splitlines())

    saved = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGQUIT)}
    try:
        fields = run(go())
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
    # signals 32 and 33 are glibc's own (thread cancellation, setxid): its posix_spawn leaves them
    # ignored in a child by design, no program can set them, and glibc takes them back when it needs them
    glibc_own = (1 << 31) | (1 << 32)
    assert int(fields["SigIgn"], 16) & ~glibc_own == 0, fields
    assert int(fields["SigBlk"], 16) == 0, fields


def test_reclaimed_gets_cpu_idle_and_shared_gets_shares_and_quota(env):
    async def go():
        rt = env.runtime()
        rec = make_pod("rec", ["sleep", "30"], qos=QOS_RECLAIMED, cpu_request=250)
        shr = make_pod("shr", ["sleep", "30"], cpu_request=500, cpu_limit=1500, memory=64 << 20)
        await rt.run(rec)
        await rt.run(shr)
        rrel = f"{env.reclaimed}/pod{rec.uid}/main"
        srel = f"{env.subtree}/pod{shr.uid}/main"
        assert env.cgroups.read(rrel, "cpu.idle") == "1"
        # and its pod's cgroup: idleness counts among siblings, and the container is its pod's
        # only child; the pod's cgroup is what competes with a shared pod's (issue 26)
        assert env.cgroups.read(f"{env.reclaimed}/pod{rec.uid}", "cpu.idle") == "1"
        assert env.cgroups.read(f"{env.subtree}/pod{shr.uid}", "cpu.idle") == "0"
        assert env.cgroups.read(srel, "cpu.idle") == "0"
        assert env.cgroups.read(srel, "cpu.shares") == "512"
        assert env.cgroups.read(srel, "cpu.cfs_quota_us") == "150000"
        assert env.cgroups.read(srel, "memory.limit_in_bytes") == str(64 << 20)
        assert env.cgroups.read(srel, "pids.max") == "256"
        await asyncio.gather(rt.stop(rec.uid, 0), rt.stop(shr.uid, 0))
        assert env.sink.last(rec.uid).reason == "Stopped"
        assert env.dirs() == []

    run(go())


def _unlimited(value: str) -> bool:
    """memory.limit_in_bytes with no limit: the page counter's maximum (or "max" on v2)."""
    return value == "max" or int(value) >= 1 << 62


def test_a_zero_memory_limit_runs_with_no_limit(env):
    """0 is "no limit" for the kubelet and runc; written to the cgroup it OOM-killed the
    container at once. Both ways in: a manifest admitted now, and a record kept from
    before admission mapped 0 to no limit."""
    from agent.workloads.manifest import parse_manifest

    async def go():
        rt = env.runtime()
        parsed = parse_manifest("metadata: {name: z}\nspec: {containers: [{name: main, command: [sleep, '30'], "
                                "resources: {limits: {memory: '0'}}}]}").pod
        fresh = make_pod("fresh", ["sleep", "30"], memory=parsed.containers[0].resources.memory_limit_bytes)
        old = make_pod("old", ["sleep", "30"], memory=0)
        for pod in (fresh, old):
            await rt.run(pod)
            st = await env.sink.wait(pod.uid, lambda s: s.containers and s.containers[0].state == ContainerState.RUNNING)
            assert st.phase == PodPhase.RUNNING, st
            value = env.cgroups.read(f"{env.subtree}/pod{pod.uid}/main", "memory.limit_in_bytes")
            assert _unlimited(value), (pod.spec.name, value)
        await asyncio.gather(rt.stop(fresh.uid, 0), rt.stop(old.uid, 0))
        assert env.sink.last(old.uid).reason == "Stopped"
        assert env.dirs() == []

    run(go())


def test_restart_policies_and_backoff(env, tmp_path):
    async def go():
        rt = env.runtime()
        counter = tmp_path / "n"
        # fails twice, then succeeds: OnFailure restarts it with back-off, then the pod succeeds
        script = f'n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; [ $n -ge 3 ]'
        pod = make_pod("onfail", ["sh", "-c", script], restart="OnFailure")
        await rt.run(pod)
        st = await env.sink.wait(pod.uid, terminal)
        assert st.phase == PodPhase.SUCCEEDED
        assert st.containers[0].restart_count == 2
        reasons = [s.containers[0].reason for s in env.sink.history[pod.uid]]
        assert "CrashLoopBackOff" in reasons
        delays = [s.containers[0].message for s in env.sink.history[pod.uid] if s.containers[0].reason == "CrashLoopBackOff"]
        assert delays[0].startswith("back-off 0.2s") and delays[1].startswith("back-off 0.4s"), delays
        # Never: one failure ends the pod
        never = make_pod("never", ["sh", "-c", "exit 7"], restart="Never")
        await rt.run(never)
        st = await env.sink.wait(never.uid, terminal)
        assert st.phase == PodPhase.FAILED and st.containers[0].exit_code == 7
        assert st.containers[0].restart_count == 0
        # Always: restarts even a clean exit, until stopped
        always = make_pod("always", ["true"], restart="Always")
        await rt.run(always)
        await env.sink.wait(always.uid, lambda s: s.containers[0].restart_count >= 2)
        await rt.stop(always.uid, 0)
        st = env.sink.last(always.uid)
        assert st.phase.terminal and st.reason == "Stopped"
        assert env.dirs() == []

    run(go())


def test_init_containers_run_in_order_before_app(env, tmp_path):
    async def go():
        rt = env.runtime()
        f = tmp_path / "order"
        pod = make_pod("inits", ["sh", "-c", f"echo app >> {f}"],
                       init=[["sh", "-c", f"echo init0 >> {f}"], ["sh", "-c", f"sleep 0.2; echo init1 >> {f}"]])
        await rt.run(pod)
        st = await env.sink.wait(pod.uid, terminal)
        assert st.phase == PodPhase.SUCCEEDED
        assert f.read_text().split() == ["init0", "init1", "app"]
        # a failing init container with Never fails the pod, the app never runs
        bad = make_pod("badinit", ["sh", "-c", f"echo ran >> {tmp_path / 'ran'}"], init=[["false"]])
        await rt.run(bad)
        st = await env.sink.wait(bad.uid, terminal)
        assert st.phase == PodPhase.FAILED and st.reason == "InitContainerFailed"
        assert not (tmp_path / "ran").exists()

    run(go())


def test_logs_rotate_by_size(env):
    async def go():
        cfg = RuntimeConfig(**{**vars(FAST), "log_max_bytes": 4096, "log_keep": 2})
        rt = env.runtime(cfg)
        pod = make_pod("chatty", ["sh", "-c", "i=0; while [ $i -lt 400 ]; do echo line-$i-xxxxxxxxxxxxxxxx; i=$((i+1)); done"])
        await rt.run(pod)
        await env.sink.wait(pod.uid, terminal)
        d = env.root / "logs" / "default_chatty"
        names = sorted(p.name for p in d.iterdir())
        # the times file rotates with its log (agent/runtime/logtimes.py)
        assert names == ["main.log", "main.log.1", "main.log.2", "main.times", "main.times.1", "main.times.2"], names
        assert all(p.stat().st_size <= 4096 for p in d.glob("main.log*"))
        assert "line-399-" in (d / "main.log").read_text()
        from agent.runtime.logtimes import parse_records

        for suffix in ("", ".1", ".2"):  # every record points inside its own log file
            size = (d / f"main.log{suffix}").stat().st_size
            offsets = [off for off, _ in parse_records((d / f"main.times{suffix}").read_bytes())]
            assert offsets and offsets[0] == 0 and all(off < size for off in offsets), (suffix, offsets, size)

    run(go())


def test_stop_sends_sigterm_then_kills_after_grace(env, tmp_path):
    async def until(path: Path) -> None:
        for _ in range(1200):  # the shells set their traps first, then say so
            if path.exists():
                return
            await asyncio.sleep(0.025)
        raise AssertionError(f"{path} never appeared")

    async def go():
        rt = env.runtime()
        marker = tmp_path / "term"
        polite = make_pod("polite", ["sh", "-c", f"trap 'echo term > {marker}; exit 0' TERM; touch {tmp_path}/p; "
                                                 "while :; do sleep 0.05; done"])
        stubborn = make_pod("stubborn", ["sh", "-c", f"trap '' TERM; touch {tmp_path}/s; while :; do sleep 0.05; done"],
                            grace=1)
        await rt.run(polite)
        await rt.run(stubborn)
        await until(tmp_path / "p")
        await until(tmp_path / "s")
        await rt.stop(polite.uid)
        st = env.sink.last(polite.uid)
        assert marker.read_text().strip() == "term"
        assert st.phase == PodPhase.SUCCEEDED and st.reason == "Stopped"
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await rt.stop(stubborn.uid)
        assert loop.time() - t0 >= 1.0  # waited the grace period, then killed
        st = env.sink.last(stubborn.uid)
        assert st.phase == PodPhase.FAILED and st.containers[0].exit_code == 137
        assert env.dirs() == []
        assert not (env.root / "runtime" / polite.uid).exists()

    run(go())


def test_fork_bomb_is_contained_by_pids_max(env):
    async def go():
        rt = env.runtime()
        # tries 10,000 processes; pids.max (256 here) refuses the rest
        bomb = make_pod("bomb", ["sh", "-c", "i=0; while [ $i -lt 10000 ]; do (sleep 30 &) 2>/dev/null; i=$((i+1)); done; sleep 30"])
        await rt.run(bomb)
        rel = f"{env.subtree}/pod{bomb.uid}/main"
        # until the kernel has refused forks (generous: a loaded machine forks slowly)
        for _ in range(2400):
            if int(env.cgroups.read(rel, "pids.events").split()[1]) > 0:
                break
            await asyncio.sleep(0.05)
        assert int(env.cgroups.read(rel, "pids.events").split()[1]) > 0  # forks were refused
        assert int(env.cgroups.read(rel, "pids.current")) <= 256
        await rt.stop(bomb.uid, 0)
        assert env.dirs() == []

    run(go())


@pytest.mark.parametrize("case", ["no_command", "no_workdir", "too_much_memory", "vanished_device", "bad_cdi"])
def test_bad_input_is_a_clear_pod_error_and_leaks_nothing(env, tmp_path, case):
    from agent.contracts.pods import DeviceGrant, DeviceNode

    async def go():
        rt = env.runtime(node_memory=1 << 30)
        kw = {}
        argv = ["true"]
        if case == "no_command":
            argv = ["/no/such/command"]
        elif case == "no_workdir":
            kw["working_dir"] = str(tmp_path / "missing")
        elif case == "too_much_memory":
            kw["memory"] = 2 << 30
        elif case == "vanished_device":
            kw["grant"] = DeviceGrant(devices=(DeviceNode("/dev/gone0", str(tmp_path / "gone0")),))
        elif case == "bad_cdi":
            kw["grant"] = DeviceGrant(cdi_devices=("vendor.example/gpu=0",))
        pod = make_pod(f"bad-{case}".replace("_", "-"), argv, **kw)
        await rt.run(pod)
        st = env.sink.last(pod.uid)
        assert st is not None and st.phase == PodPhase.FAILED and st.reason == "StartError", st
        expect = {"no_command": "No such file", "no_workdir": "chdir", "too_much_memory": "exceeds the node's memory",
                  "vanished_device": "is gone", "bad_cdi": "not defined by any spec"}[case]
        assert expect in st.message, st.message
        assert st.containers[0].state == ContainerState.TERMINATED
        assert env.dirs() == []
        assert not (env.root / "runtime" / pod.uid).exists()

    run(go())


@pytest.fixture
def loops(tmp_path):
    """Two loop devices on sparse files; detached after."""
    devs = []
    try:
        for i in range(2):
            backing = tmp_path / f"disk{i}"
            with open(backing, "wb") as f:
                f.truncate(1 << 20)
            r = subprocess.run(["losetup", "-f", "--show", str(backing)], capture_output=True, text=True)
            if r.returncode != 0:
                pytest.skip(f"losetup failed: {r.stderr.strip()}")
            devs.append(r.stdout.strip())
        yield devs
    finally:
        for d in devs:
            subprocess.run(["losetup", "-d", d], check=False)


@pytest.mark.parametrize("policy,enforcer", [("managed", "v1"), ("strict", "v1"), ("managed", "bpf"),
                                             ("strict", "bpf")])
def test_granted_device_opens_and_managed_ungranted_gives_eperm(env, loops, policy, enforcer):
    """v1: the devices controller. bpf: the v2 BPF program alone (this hybrid host's
    unified tree takes cgroup BPF programs; v1's devices controller is left out)."""
    from agent.cgroups.devbpf import DevicePrograms
    from agent.cgroups.workload import WorkloadCgroups
    from agent.contracts.pods import DeviceGrant, DeviceNode

    if enforcer == "bpf":
        pytest.importorskip("bcc")

    granted, other = loops
    probe = ("import errno, os, sys\n"
             "for p in sys.argv[1:]:\n"
             "    try:\n"
             "        os.close(os.open(p, os.O_RDONLY)); print(p, 'ok')\n"
             "    except OSError as e:\n"
             "        print(p, errno.errorcode[e.errno])\n")

    async def go():
        cfg = RuntimeConfig(**{**vars(FAST), "device_policy": policy})
        rt = env.runtime(cfg, managed_devices=lambda: [granted, other])
        if enforcer == "bpf":
            cg = WorkloadCgroups(env.layout, env.subtree, DevicePrograms())
            cg.hierarchies = [h for h in cg.hierarchies if "devices" not in h.controllers]
            rt.cgroups = cg
        grant = DeviceGrant(devices=(DeviceNode(granted, granted, "rw"), DeviceNode("/dev/hwagent-test-disk", granted)))
        pod = make_pod("dev", ["/usr/bin/python3", "-S", "-c", probe, granted, other, "/dev/null",
                               "/dev/hwagent-test-disk"], grant=grant)
        await rt.run(pod)
        st = await env.sink.wait(pod.uid, terminal)
        assert st.phase == PodPhase.SUCCEEDED, st
        out = dict(line.rsplit(" ", 1) for line in read_log(env, pod).splitlines())
        assert out == {granted: "ok", other: "EPERM", "/dev/null": "ok", "/dev/hwagent-test-disk": "ok"}, out
        assert not Path("/dev/hwagent-test-disk").exists()  # the bind lived in the workload's mount namespace

    run(go())


def test_granted_devices_are_usable_by_a_non_root_workload_and_the_hosts_nodes_keep_their_mode(env, loops):
    """A pod running as a user (nobody) opens its granted loop device (the host's node is root's,
    0660 or stricter) through a node of its own bound in its mount namespace, under its own name and
    another; an ungranted one stays closed to it (EACCES: the host's node, untouched, is checked
    before the devices rules), and the host's nodes keep owner and mode."""
    import dataclasses

    from agent.contracts.pods import DeviceGrant, DeviceNode, RunAs

    granted, other = loops
    before = {d: (os.stat(d).st_uid, os.stat(d).st_gid, os.stat(d).st_mode) for d in (granted, other)}
    assert before[granted][0] == 0 and not before[granted][2] & 0o006, "the host node is no user's"
    # the answer is the exit status (this test's root dir is not traversable by nobody, so no log):
    # 0 when every path opened as expected, else 10 + a bit per path that did not
    probe = ("import errno, os, sys\n"
             "bad = 0\n"
             "for i, arg in enumerate(sys.argv[1:]):\n"
             "    p, want = arg.split('=')\n"
             "    try:\n"
             "        fd = os.open(p, os.O_RDWR); os.read(fd, 512); os.close(fd); got = 'ok'\n"
             "    except OSError as e:\n"
             "        got = errno.errorcode[e.errno]\n"
             "    bad |= (got != want) << i\n"
             "sys.exit(10 + bad if bad else 0)\n")

    async def go():
        cfg = RuntimeConfig(**{**vars(FAST), "device_policy": "managed"})
        rt = env.runtime(cfg, managed_devices=lambda: [granted, other])
        grant = DeviceGrant(devices=(DeviceNode(granted, granted, "rw"),
                                     DeviceNode("/dev/hwagent-test-userdisk", granted, "rw")))
        pod = make_pod("userdev", ["/usr/bin/python3", "-S", "-c", probe, f"{granted}=ok",
                                   "/dev/hwagent-test-userdisk=ok", f"{other}=EACCES"], grant=grant)
        pod = dataclasses.replace(pod, spec=dataclasses.replace(pod.spec, run_as=RunAs(65534, 65534, ())))
        await rt.run(pod)
        st = await env.sink.wait(pod.uid, terminal)
        assert st.phase == PodPhase.SUCCEEDED and st.containers[0].exit_code == 0, st
        assert {d: (os.stat(d).st_uid, os.stat(d).st_gid, os.stat(d).st_mode) for d in (granted, other)} == before
        assert not Path("/dev/hwagent-test-userdisk").exists()
        assert not (env.root / "runtime" / pod.uid).exists(), "its nodes went with the container's state"

    run(go())


def test_stop_of_a_pod_not_running_here_reports_it_terminal_and_run_is_idempotent(env):
    async def go():
        rt = env.runtime()
        await rt.stop("feedface", 0, "Removed")
        st = env.sink.last("feedface")
        assert st.phase == PodPhase.FAILED and st.reason == "Removed" and "not running" in st.message
        pod = make_pod("twice", ["sleep", "30"])
        await rt.run(pod)
        pid = rt.status(pod.uid).containers[0].pid
        await rt.run(pod)  # a second hand-over changes nothing
        assert rt.status(pod.uid).containers[0].pid == pid
        await rt.stop(pod.uid, 0)
        assert env.dirs() == []

    run(go())


def test_one_container_that_cannot_start_fails_the_pod_and_stops_the_others(env):
    async def go():
        rt = env.runtime()
        pod = make_pod("half", ["sleep", "60"], restart="Always", extra=[("broken", ["/no/such/binary"])])
        await rt.run(pod)
        st = await env.sink.wait(pod.uid, terminal)
        assert st.phase == PodPhase.FAILED and st.reason == "StartError" and "broken" in st.message
        assert all(c.state == ContainerState.TERMINATED for c in st.containers)
        assert env.dirs() == []

    run(go())


def test_restore_leaves_another_daemons_pods_in_a_shared_subtree_alone(env, tmp_path):
    """Two hwagents with different root dirs and the same cgroup subtree: the second one's
    restore must not take the first one's running pod for an orphan and kill it (it did)."""
    async def go():
        first = env.runtime()
        pod = make_pod("keep", ["sleep", "300"])
        await first.run(pod)
        await env.sink.wait(pod.uid, lambda st: st.phase == PodPhase.RUNNING)
        from agent.cgroups.workload import WorkloadCgroups
        from agent.runtime.runtime import WorkloadRuntime

        other = WorkloadRuntime(env.cfg, WorkloadCgroups(env.layout, env.subtree), tmp_path / "other-root",
                                lambda: env.sink)
        await other.restore([])
        await asyncio.sleep(0.5)
        assert first.status(pod.uid).phase == PodPhase.RUNNING
        # nothing was reported for it: no kill, no exit
        assert env.sink.history[pod.uid][-1].phase == PodPhase.RUNNING
        await first.stop(pod.uid, grace_s=1)
        assert env.dirs() == []

    run(go())


@pytest.mark.parametrize("shim", ["c", "python"])
def test_shim_records_when_each_chunk_of_output_arrived(env, shim, tmp_path):
    """The log stays the workload's bytes; <container>.times says when each chunk came."""
    import shutil
    import sys
    import time

    from agent.runtime import shim as py_shim
    from agent.runtime.logtimes import parse_records, split_lines

    async def go():
        rt = env.runtime(RuntimeConfig(**{**vars(FAST), "shim": ""}))
        if shim == "python":
            rt.shim = [sys.executable, "-S", py_shim.__file__]
        else:
            if shutil.which("gcc") is None:
                pytest.skip("no gcc to build the C shim from this source")
            exe = tmp_path / "hwagent-shim"
            subprocess.run(["gcc", "-O2", "-Wall", "-o", str(exe), str(Path(py_shim.__file__).with_name("shim.c"))],
                           check=True, timeout=120)
            rt.shim = [str(exe)]
        marker = tmp_path / "go"
        pod = make_pod("stamped", ["sh", "-c", f"echo one; while [ ! -e {marker} ]; do sleep 0.02; done; echo two"])
        before = time.time_ns()
        await rt.run(pod)
        d = env.root / "logs" / "default_stamped"
        for _ in range(3000):  # the first line is in the log before the marker is made
            if (d / "main.log").exists() and (d / "main.log").read_bytes() == b"one\n":
                break
            await asyncio.sleep(0.02)
        middle = time.time_ns()
        marker.touch()
        await env.sink.wait(pod.uid, terminal)
        after = time.time_ns()
        log = (d / "main.log").read_bytes()
        assert log == b"one\ntwo\n"  # unchanged: no prefix in the log itself
        lines = split_lines(log, parse_records((d / "main.times").read_bytes()))
        assert [ln.text for ln in lines] == [b"one\n", b"two\n"]
        assert lines[0].ns is not None and before <= lines[0].ns <= middle, (before, lines, middle)
        assert lines[1].ns is not None and middle <= lines[1].ns <= after, (middle, lines, after)

    run(go())
