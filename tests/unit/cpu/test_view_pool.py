"""`hwagent cpus` names the pool of a shared pod that has just been admitted (issue 37 item 5):
during its ramp-up (transition_period_s) it has no owner pool yet and showed POOL ``-``
(``"pool": ""`` in JSON) until the ramp-up ended, or a restart, showed ``share``."""

from __future__ import annotations

from agent.cpu.view import Allocation, render_table, summarize
from agent.cpuset import CPUSet
from agent.status.views import Handles, cpus_view
from tests.unit.cpu.helpers import Clock, make_policy, req


def _policy():
    clock = Clock()
    p = make_policy(clock)
    p.pod_running = lambda uid: True
    p.allocate(req("web", "c", "shared_cores", 0.5))
    p.allocate(req("batch", "c", "shared_cores", 1, pool="batch"))
    return p, clock


class _CPU:
    """The read side of the CPU policy the status view asks (``CPUAllocations``)."""

    def __init__(self, policy) -> None:
        self.policy = policy

    def allocations(self):
        return self.policy.state.containers()

    def pools(self):
        return dict(self.policy.state.pools)


def _numa(policy) -> dict[int, CPUSet]:
    return {n: CPUSet(c) for n, c in policy.idx.numa_cpus.items()}


def test_a_shared_pod_in_ramp_up_is_shown_in_the_pool_it_joins() -> None:
    p, clock = _policy()
    view = cpus_view(Handles(cpu=_CPU(p)), _numa(p))
    rows = {a["pod"]: a for a in view["allocations"]}
    assert (rows["name-web"]["pool"], rows["name-web"]["ramp_up"]) == ("share", True)
    assert (rows["name-batch"]["pool"], rows["name-batch"]["ramp_up"]) == ("batch", True)
    text = render_table(view)
    assert "share (ramp-up)" in text and "batch (ramp-up)" in text, text
    clock.t += 100
    p.complete_ramp_up()
    rows = {a["pod"]: a for a in cpus_view(Handles(cpu=_CPU(p)), _numa(p))["allocations"]}
    assert (rows["name-web"]["pool"], rows["name-web"]["ramp_up"]) == ("share", False)
    assert "(ramp-up)" not in render_table(cpus_view(Handles(cpu=_CPU(p)), _numa(p)))


def test_other_qos_levels_keep_their_owner_pool() -> None:
    s = summarize({0: CPUSet.parse("0-3")}, {"reclaim": CPUSet.parse("3")},
                  [Allocation("u", "ns", "r", "c", "reclaimed_cores", "reclaim", CPUSet.parse("3"))], "test")
    assert s["allocations"][0]["pool"] == "reclaim" and s["allocations"][0]["ramp_up"] is False


def test_a_dedicated_container_in_its_ramp_up_is_not_joining_a_pool() -> None:
    p, _ = _policy()
    p.allocate(req("job", "c", "dedicated_cores", 2, binding=True, hint=(1,)))
    rows = {a["pod"]: a for a in cpus_view(Handles(cpu=_CPU(p)), _numa(p))["allocations"]}
    assert (rows["name-job"]["pool"], rows["name-job"]["ramp_up"]) == ("dedicated", False)
