"""The drain decision over every combination of what Slurm says of the node and what hwagent
sees (agent.slurm.drain.decide), the parse of ``scontrol show node -o`` as Slurm 22.05 prints
it, and the problems/reason texts (agent.slurm.health)."""

from __future__ import annotations

import itertools

import pytest

from agent.contracts.plugins import PluginDeviceState, PluginState
from agent.slurm.drain import (
    MAX_REASON,
    Action,
    NodeState,
    NodeStateError,
    decide,
    drain_reason,
    is_hwagent_reason,
    parse_show_node,
)
from agent.slurm.health import Problem, node_problems, problem_line

P1 = (Problem("example.com/scratch loop7", "hwagent-probes: 3 errors in 30s"),)
P2 = (*P1, Problem("example.com/nic eth1", "driver unbound"))
PROBLEMS = {"none": (), "one": P1, "two": P2}
BASES = ("IDLE", "MIXED", "ALLOCATED", "DOWN", "COMPLETING")
FLAGS = (frozenset(), frozenset({"DRAIN"}), frozenset({"FAIL"}), frozenset({"NOT_RESPONDING"}))


def reasons_for(problems):
    return {"": "", "admin": "disk swap [ticket 42]", "ours-same": drain_reason(problems) if problems else
            "hwagent: example.com/scratch loop7 old", "ours-old": "hwagent: example.com/scratch loop7 old",
            "admin-lookalike": "hwagentish maintenance"}


def expected(base, flags, reason_kind, problems):
    """The rule, written out independently of decide's branches."""
    drained = bool(flags & {"DRAIN", "FAIL"})
    ours = reason_kind in ("ours-same", "ours-old")
    someone_elses = reason_kind in ("admin", "admin-lookalike") or (drained and reason_kind == "")
    if problems:
        if someone_elses:
            return Action.NONE
        if drained and reason_kind == "ours-same":
            return Action.NONE
        return Action.DRAIN
    if drained and ours and base != "DOWN":
        return Action.RESUME
    return Action.NONE


@pytest.mark.parametrize("base,flags,reason_kind,pkey", list(itertools.product(
    BASES, FLAGS, ("", "admin", "ours-same", "ours-old", "admin-lookalike"), PROBLEMS)))
def test_decide_every_combination(base, flags, reason_kind, pkey):
    problems = PROBLEMS[pkey]
    reason = reasons_for(problems)[reason_kind]
    d = decide(NodeState("n2", base, flags, reason), problems)
    assert d.action is expected(base, flags, reason_kind, problems), d
    assert d.why
    if d.action is Action.DRAIN:
        assert d.reason == drain_reason(problems)
    else:
        assert d.reason == ""


def test_an_administrators_drain_is_never_resumed_nor_overwritten():
    admin = NodeState("n3", "IDLE", frozenset({"DRAIN"}), "bad DIMM")
    assert decide(admin, ()).action is Action.NONE
    assert decide(admin, P1).action is Action.NONE


def test_drain_reason_names_the_first_problem_and_counts_the_rest():
    assert drain_reason(P1) == "hwagent: example.com/scratch loop7 hwagent-probes: 3 errors in 30s"
    assert drain_reason(P2).endswith(" (+1 more)") and drain_reason(P2).startswith("hwagent: example.com/scratch")
    long = (Problem("r " + "d" * 300, "x"), Problem("s", "y"))
    text = drain_reason(long)
    assert len(text) <= MAX_REASON and text.endswith("... (+1 more)") and is_hwagent_reason(text)
    with pytest.raises(ValueError):
        drain_reason(())


@pytest.mark.parametrize("reason,ours", [("hwagent: x", True), ("hwagent:", True), ("hwagent:x", False),
                                         ("hwagentx: y", False), ("HWAGENT: x", False), ("", False),
                                         (" hwagent: x", False)])
def test_whose_reason(reason, ours):
    assert is_hwagent_reason(reason) is ours


# scontrol show node -o, as slurm-wlm 22.05.8 prints it (captured from the real one)
LINE = ("NodeName=n2 Arch=x86_64 CoresPerSocket=2  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=1.48 "
        "AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=10.213.40.12 NodeHostName=n2 "
        "Version=22.05.8 OS=Linux 6.18.44 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=24105 AllocMem=0 FreeMem=20518 "
        "Sockets=1 Boards=1 State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A "
        "Partitions=test  BootTime=2026-12-07T17:14:53 SlurmdStartTime=2026-12-07T20:27:17 "
        "LastBusyTime=2026-12-07T20:27:17 CfgTRES=cpu=2,mem=24105M,billing=2 AllocTRES= CapWatts=n/a "
        "CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s{reason}\n")


def test_parse_a_drained_node_with_a_reason_that_looks_like_fields():
    text = LINE.format(state="IDLE+DRAIN", reason=" Reason=hwagent: x y=z State=DOWN [root@2026-12-07T20:27:17]")
    assert parse_show_node(text, "n2") == NodeState("n2", "IDLE", frozenset({"DRAIN"}), "hwagent: x y=z State=DOWN")


@pytest.mark.parametrize("state,base,flags", [("IDLE", "IDLE", set()), ("MIXED+DRAIN", "MIXED", {"DRAIN"}),
                                              ("DOWN*+DRAIN", "DOWN", {"DRAIN"}),
                                              ("IDLE+DRAIN+NOT_RESPONDING", "IDLE", {"DRAIN", "NOT_RESPONDING"}),
                                              ("IDLE*", "IDLE", set())])
def test_parse_states(state, base, flags):
    node = parse_show_node(LINE.format(state=state, reason=""), "n2")
    assert (node.base, node.flags, node.reason) == (base, frozenset(flags), "")


@pytest.mark.parametrize("text", ["", "Node n2 not found\n", LINE.format(state="IDLE", reason="").replace(
    "NodeName=n2", "NodeName=n3"), LINE.format(state="IDLE", reason="") * 2,
    LINE.format(state="IDLE", reason="").replace("State=IDLE", "Status=IDLE")])
def test_parse_refuses_what_is_not_this_nodes_record(text):
    with pytest.raises(NodeStateError):
        parse_show_node(text, "n2")


def test_problems_from_the_owners_values():
    states = [PluginState("example.com/scratch", socket=__import__("pathlib").Path("/x"), devices=(
        PluginDeviceState("loop7", False, "hwagent-probes: 3 errors\nin 30s"), PluginDeviceState("loop8", True)))]
    got = node_problems(states, [("pressure", True), ("deviceplugins", False), ("slurm-drain", False),
                                 ("slurm-jobs", False), ("cpu", False)])
    assert got == (Problem("component deviceplugins", "unhealthy"),
                   Problem("example.com/scratch loop7", "hwagent-probes: 3 errors\nin 30s"))
    assert problem_line(got[1]) == "hwagent: example.com/scratch loop7 hwagent-probes: 3 errors in 30s"
    assert node_problems([], []) == ()
    assert node_problems([], [("pressure", False)]) == (Problem("component pressure", "unhealthy"),)
