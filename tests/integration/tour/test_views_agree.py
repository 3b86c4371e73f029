"""Every view says the same thing about the same pods, asked of a real daemon as a user does
(issue 37): `cpus` names the pool a just-admitted shared pod joins (item 5); `describe` shows the
memory limit and a NUMA-bound pod's node, as `ps` does, and `status` counts the pods `ps`
lists (item 9)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.integration.tour.conftest import Tour, open_tour

pytestmark = [pytest.mark.root, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def tour() -> Iterator[Tour]:
    t = next(gen := open_tour())
    t.ok("launch", "--name", "job", "--cpus", "1", "--qos", "dedicated", "--numa-binding", "--memory", "64Mi",
         "--", "sleep", "120")
    t.ok("launch", "--name", "web", "--cpu-request", "100m", "--memory", "128Mi", "--", "sleep", "120")
    t.ok("launch", "--name", "once", "--wait", "--", "true")
    yield t
    yield from gen


def test_a_just_admitted_shared_pod_is_shown_in_the_pool_it_joins(tour: Tour) -> None:
    rows = {a["pod"]: a for a in json.loads(tour.ok("cpus", "--format", "json"))["allocations"]}
    assert rows["web"]["pool"] == "share" and rows["web"]["ramp_up"] is True, rows["web"]
    assert rows["job"]["pool"] == "dedicated" and rows["job"]["ramp_up"] is False, rows["job"]
    line = next(ln for ln in tour.ok("cpus").splitlines() if ln.startswith("default/web "))
    assert "share (ramp-up)" in line, line


def test_describe_shows_the_memory_limit(tour: Tour) -> None:
    text = tour.ok("describe", "web")
    assert "    resources: cpu request 100m, memory limit 128Mi (request 128Mi)" in text, text


def test_a_numa_bound_pod_reads_as_bound_to_its_node_in_ps_and_describe(tour: Tour) -> None:
    text = tour.ok("describe", "job")
    line = next(ln for ln in text.splitlines() if ln.startswith("  main: "))
    assert "memory nodes 0" in line and "NUMA affinity 0" in line, line
    row = next(ln.split() for ln in tour.ok("ps").splitlines() if " job " in f" {ln} ")
    header = tour.ok("ps").splitlines()[0].split()
    assert row[header.index("NUMA")] == "0", (header, row)


def test_status_counts_the_pods_ps_lists(tour: Tour) -> None:
    listed = json.loads(tour.ok("ps", "--format", "json"))["pods"]
    assert {p["name"] for p in listed} >= {"job", "web", "once"}
    line = next(ln for ln in tour.ok("status").splitlines() if ln.startswith("pods: "))
    assert line.startswith(f"pods: {len(listed)} "), (line, [p["name"] for p in listed])


def test_a_launch_that_overcommits_the_shared_cpus_says_so(tour: Tour) -> None:
    """issue 37 item 13: admitted (Katalyst's shared_cores rule), and said on launch's stderr."""
    rows = {a["pod"]: a for a in json.loads(tour.ok("cpus", "--format", "json"))["allocations"]}
    from agent.cpuset import CPUSet

    n = len(CPUSet.parse(rows["web"]["cpus"]))  # web (100m) runs on every CPU shared pods may use
    r = tour.cli("launch", "--name", "work", "--cpu-request", str(n), "--", "sleep", "120")
    assert r.returncode == 0, r.stderr
    assert f"warning: shared pods request {n}.1 CPUs in all, more than the {n} CPU" in r.stderr, r.stderr
    assert "not a reservation" in r.stderr, r.stderr
