"""Exclusive cores beside the shared pool on the live machine (issue 23): a real
daemon with the runtime on, real cgroups under a test-owned subtree, two shared
services (``sleep``) and then ``hwagent launch --qos dedicated --cpus 1``.

This machine has one NUMA node. With the standalone default (``dedicated_numa``
"auto" = exclusive-cores) the dedicated job is admitted on one CPU and the
services move to the other, in every view and in the kernel's
``Cpus_allowed_list``; under Katalyst's whole-node rule it is refused as before,
since the node would leave the shared pools and the services would have no CPU."""

from __future__ import annotations

import pytest

from agent.cpuset import CPUSet
from tests.integration.runtime.test_views_live import Node, _allowed, _config, node  # noqa: F401 (fixture)

pytestmark = [pytest.mark.timeout(300), pytest.mark.root]

ALL = CPUSet.parse("0-1")


def _machine_fits() -> None:
    online = CPUSet.parse(open("/sys/devices/system/cpu/online").read().strip())
    if len(online) < 2:
        pytest.skip("needs two online CPUs")


def _views(nd: Node, name: str) -> dict[str, CPUSet | None]:
    """The main container's CPUs as ps, its cgroup and the kernel see them."""
    pod = next(p for p in nd.ps() if p["name"] == name)
    c = pod["containers"][0]
    if c["state"] != "running" or not c.get("pid"):
        return {}
    return {"ps": CPUSet(c["cpu_ids"]), "cpuset.cpus": nd.cpuset(pod["uid"], c["name"]),
            "Cpus_allowed_list": _allowed(c["pid"])}


def _on(nd: Node, name: str, want: CPUSet) -> bool:
    seen = _views(nd, name)
    assert seen and all(v == want for v in seen.values()), f"{name}: {seen}, want {want}"
    return True


def _start_services(nd: Node, cpu_extra: str) -> None:
    nd.cfg = _config(nd.base, nd.subtree, check_s=1.0, cpu_extra=cpu_extra)
    nd.start()
    for name in ("svc1", "svc2"):
        r = nd.cli("launch", "--name", name, "--cpu-request", "500m", "--", "sleep", "1000")
        assert r.returncode == 0, r.stderr
    # with no reclaim minimum the shared pool holds both CPUs before the job comes
    for name in ("svc1", "svc2"):
        nd.until(lambda n=name: _on(nd, n, ALL), f"{name} to run on {ALL} in every view")


def test_dedicated_job_beside_two_shared_services_on_one_numa_node(node):  # noqa: F811 (the fixture)
    _machine_fits()
    _start_services(node, "reclaim_min_cpus = 0")  # dedicated_numa left at "auto"
    assert "dedicated_numa=exclusive-cores" in node.daemon.log().replace('"', "")
    r = node.cli("launch", "--name", "job", "--qos", "dedicated", "--cpus", "1", "--format", "json",
                 "--", "sleep", "1000")
    assert r.returncode == 0, r.stderr
    job = node.until(lambda: (v := _views(node, "job")) and v["ps"], "the job to run")
    assert len(job) == 1, job
    rest = ALL - job
    node.until(lambda: _on(node, "job", job), f"the job's cgroup and process on {job}")
    for name in ("svc1", "svc2"):
        node.until(lambda n=name: _on(node, n, rest), f"{name} to shrink to {rest} (the enforcer's write)")
    # the job leaving gives the services both CPUs back
    assert node.cli("rm", "job").returncode == 0
    for name in ("svc1", "svc2"):
        node.until(lambda n=name: _on(node, n, ALL), f"{name} to get {ALL} back")


def test_whole_node_refuses_the_dedicated_job_as_katalyst(node):  # noqa: F811 (the fixture)
    _machine_fits()
    _start_services(node, 'reclaim_min_cpus = 0\ndedicated_numa = "whole-node"')
    r = node.cli("launch", "--name", "job", "--qos", "dedicated", "--cpus", "1", "--", "sleep", "1000")
    assert r.returncode != 0 and "no cpu for the shared_cores" in r.stderr, (r.returncode, r.stderr)
    assert not [p for p in node.ps() if p["name"] == "job"]
    for name in ("svc1", "svc2"):
        assert _on(node, name, ALL)
