"""Launch plans (refusals before any cgroup exists) and CDI resolution, on fixture files."""

from __future__ import annotations

import json
import os
import stat

import pytest

from agent.cpuset import CPUSet
from agent.runtime.cdi import CDIError, resolve
from agent.runtime.config import RuntimeConfig
from agent.runtime.plan import PlanError, plan_container
from agent.contracts.pods import (
    AdmittedPod,
    ContainerAssignment,
    ContainerSpec,
    DeviceGrant,
    DeviceNode,
    EnvVar,
    Mount,
    PodSpec,
    Resources,
)


def fake_stat(nodes: dict[str, tuple[str, int, int]]):
    def st(path: str) -> os.stat_result:
        if path not in nodes:
            raise FileNotFoundError(2, "No such file or directory", path)
        kind, mj, mn = nodes[path]
        mode = (stat.S_IFCHR if kind == "c" else stat.S_IFBLK) | 0o600
        return _Stat(mode, os.makedev(mj, mn))  # type: ignore[return-value]

    return st


class _Stat:
    def __init__(self, mode, rdev):
        self.st_mode, self.st_rdev = mode, rdev


NO_GRANT = DeviceGrant()
DEFAULT_CONFIG = RuntimeConfig()
NO_NODES = fake_stat({})


def pod(qos="shared", grant=NO_GRANT, **res) -> tuple[AdmittedPod, ContainerSpec, ContainerAssignment]:
    c = ContainerSpec("main", ("run",), env=(EnvVar("A", "1"), EnvVar("DEV", "spec")),
                      resources=Resources(**res))
    spec = PodSpec("p", "ns", "u1", (c,))
    a = ContainerAssignment("main", CPUSet.parse("1-2"), CPUSet.parse("0"), grant=grant)
    return AdmittedPod(spec, qos, {"main": a}, 0.0), c, a


def plan(p, c, a, cfg=DEFAULT_CONFIG, managed=(), stat_fn=NO_NODES, exists=lambda p: True, mem=None):
    return plan_container(p, c, a, cfg, all_mems=CPUSet.parse("0-1"), managed=managed, node_memory=mem,
                          stat=stat_fn, exists=exists)


def test_shared_pod_limits_and_env():
    grant = DeviceGrant(envs={"DEV": "plugin"}, devices=(DeviceNode("/dev/x0", "/dev/loop3"),),
                        mounts=(Mount("/opt/lib", "/usr/lib/vendor", read_only=True),))
    p, c, a = pod(grant=grant, cpu_request_milli=500, cpu_limit_milli=2000, memory_limit_bytes=1 << 20)
    lp = plan(p, c, a, managed=[("b", 7, 3), ("b", 7, 4)], stat_fn=fake_stat({"/dev/loop3": ("b", 7, 3)}))
    lim = lp.limits
    assert (lim.cpus, lim.mems, lim.cpu_shares, lim.cpu_quota_us, lim.memory_limit) == (
        CPUSet.parse("1-2"), CPUSet.parse("0"), 512, 200000, 1 << 20)
    assert [r.line() for r in lim.device_deny] == ["b 7:4 rwm"]
    assert lim.needs == {"cpuset", "cpu", "memory", "pids", "devices"}
    assert lp.env["A"] == "1" and lp.env["DEV"] == "plugin" and lp.env["HWAGENT_POD_UID"] == "u1"
    assert lp.binds == (("/dev/loop3", "/dev/x0", False), ("/usr/lib/vendor", "/opt/lib", True))


def test_quota_only_for_shared_and_idle_only_for_reclaimed():
    p, c, a = pod("dedicated", cpu_request_milli=2000, cpu_limit_milli=2000)
    assert plan(p, c, a).limits.cpu_quota_us is None
    p, c, a = pod("reclaimed", cpu_limit_milli=1000)
    lim = plan(p, c, a).limits
    assert lim.cpu_idle and lim.cpu_shares == 1024  # request defaults to the limit
    p, c, a = pod("shared")
    assert plan(p, c, a).limits.mems == CPUSet.parse("0")


@pytest.mark.parametrize("case,expect", [
    ("memory", "exceeds the node's memory"),
    ("vanished", "granted device node /dev/loop9 is gone"),
    ("not_a_node", "is not a device node"),
    ("mount", "mount source /nope"),
])
def test_refusals(case, expect):
    grant = DeviceGrant()
    res = {}
    stat_fn = fake_stat({})
    exists = lambda p: True  # noqa: E731
    if case == "memory":
        res["memory_limit_bytes"] = 2 << 30
    elif case == "vanished":
        grant = DeviceGrant(devices=(DeviceNode("/dev/loop9", "/dev/loop9"),))
    elif case == "not_a_node":
        grant = DeviceGrant(devices=(DeviceNode("/dev/f", "/etc/hostname"),))
        stat_fn = os.stat
    elif case == "mount":
        grant = DeviceGrant(mounts=(Mount("/x", "/nope"),))
        exists = lambda p: False  # noqa: E731
    p, c, a = pod(grant=grant, **res)
    with pytest.raises(PlanError, match=expect):
        plan(p, c, a, stat_fn=stat_fn, exists=exists, mem=1 << 30)


def test_cdi_resolves_device_and_spec_edits(tmp_path):
    etc, run = tmp_path / "etc", tmp_path / "run"
    etc.mkdir()
    run.mkdir()
    (etc / "vendor.json").write_text(json.dumps({
        "cdiVersion": "0.6.0", "kind": "vendor.example/gpu",
        "containerEdits": {"env": ["VENDOR_ALL=1"]},
        "devices": [{"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/vgpu0", "hostPath": "/dev/loop0"}],
                                                       "mounts": [{"hostPath": "/usr/lib/v", "containerPath": "/v",
                                                                   "options": ["ro", "bind"]}]}}]}))
    # a later directory wins on a name clash
    (run / "override.yaml").write_text("cdiVersion: 0.6.0\nkind: vendor.example/gpu\ndevices:\n"
                                       "  - name: '1'\n    containerEdits:\n      env: [ONE=yes]\n")
    edits = resolve(["vendor.example/gpu=0", "vendor.example/gpu=1"], [str(etc), str(run)])
    assert edits.env == {"VENDOR_ALL": "1", "ONE": "yes"}
    assert edits.devices == (DeviceNode("/dev/vgpu0", "/dev/loop0", "rwm"),)
    assert edits.mounts == (Mount("/v", "/usr/lib/v", True),)
    with pytest.raises(CDIError, match="not defined by any spec"):
        resolve(["vendor.example/gpu=7"], [str(etc)])


def test_cdi_hooks_are_refused(tmp_path):
    (tmp_path / "h.json").write_text(json.dumps({"kind": "v.example/x", "devices": [
        {"name": "a", "containerEdits": {"hooks": [{"hookName": "createContainer", "path": "/bin/true"}]}}]}))
    with pytest.raises(CDIError, match="hooks are not supported"):
        resolve(["v.example/x=a"], [str(tmp_path)])


def test_cdi_bad_file_is_named(tmp_path):
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(CDIError, match="bad.json is unreadable"):
        resolve(["v.example/x=a"], [str(tmp_path)])


def test_a_non_root_pod_gets_nodes_of_its_own_instead_of_the_hosts():
    """Root's pod binds the host's node where it is renamed; a user's pod gets every granted node as a
    node of its own to make (the host's stay as they are), and the devices rules are the same."""
    import dataclasses

    from agent.contracts.pods import RunAs
    from agent.runtime.plan import UserNode

    grant = DeviceGrant(devices=(DeviceNode("/dev/x0", "/dev/loop3"), DeviceNode("/dev/loop4", "/dev/loop4")))
    nodes = fake_stat({"/dev/loop3": ("b", 7, 3), "/dev/loop4": ("b", 7, 4)})
    p, c, a = pod(grant=grant)
    as_root = plan(p, c, a, managed=[("b", 7, 3), ("b", 7, 4)], stat_fn=nodes)
    assert as_root.binds == (("/dev/loop3", "/dev/x0", False),) and as_root.user_nodes == ()
    for who, own in ((RunAs(0, 0, ()), False), (RunAs(1000, 1000, (27,)), True)):
        q = dataclasses.replace(p, spec=dataclasses.replace(p.spec, run_as=who))
        lp = plan(q, c, a, managed=[("b", 7, 3), ("b", 7, 4)], stat_fn=nodes)
        assert lp.limits.device_allow == as_root.limits.device_allow
        if own:
            assert lp.binds == () and lp.user_nodes == (UserNode("/dev/x0", "b", 7, 3), UserNode("/dev/loop4", "b", 7, 4))
        else:
            assert lp.binds == as_root.binds and lp.user_nodes == ()
