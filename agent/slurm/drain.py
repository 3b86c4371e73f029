"""Drain and resume decisions for this node (issue 35 part 3): pure, tested exhaustively.

``decide(node, problems)`` says what to ask Slurm, from what Slurm says of the node
(``parse_show_node`` over ``scontrol show node -o NAME``) and the node's problems
(``agent.slurm.health``):

- problems, and no reason on the node: DRAIN with hwagent's reason
  (``hwagent: <device> <why>``, the first problem, ``(+N more)`` for the rest);
- problems, and hwagent's own reason that no longer says them: DRAIN again with the
  new reason (scontrol replaces a drained node's reason);
- no problems, and the node drained (or failed) with hwagent's reason, and not down:
  RESUME;
- anything else: nothing (a node drained without any reason is someone else's too). In particular a reason that is not hwagent's (an
  administrator's drain, Slurm's own "Not responding", a down node's reason) is
  never replaced and never resumed, and a down node is never resumed (RESUME would
  also undo the DOWN, which is Slurm's or an administrator's); once it is back up
  and still carries hwagent's drain, the drain is resumed then.

hwagent's reason is recognised by its prefix ``hwagent: `` (``REASON_PREFIX``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from agent.slurm.health import REASON_PREFIX, Problem

__all__ = ["Action", "Decision", "NodeState", "NodeStateError", "decide", "drain_reason", "is_hwagent_reason",
           "parse_show_node", "MAX_REASON"]

#: a reason's length at most: slurm.conf and sinfo show it whole, and a shorter one is read back unchanged
MAX_REASON = 160

#: scontrol appends who set a reason and when: ``Reason=text [root@2026-12-07T20:27:17]``
_SET_BY = re.compile(r"\s*\[[^\[\]@]*@[^\[\]]*\]\s*$")
_STATE = re.compile(r"(?:^|\s)State=(\S+)")
_NAME = re.compile(r"^NodeName=(\S+)")


class Action(Enum):
    NONE = "none"
    DRAIN = "drain"
    RESUME = "resume"


@dataclass(frozen=True)
class NodeState:
    """What Slurm says of a node: its base state (IDLE, MIXED, ALLOCATED, DOWN, ...), its
    flags (DRAIN, FAIL, NOT_RESPONDING, ...) and its reason ("" when none)."""

    name: str
    base: str
    flags: frozenset[str] = frozenset()
    reason: str = ""

    @property
    def drained(self) -> bool:
        """Draining or drained, or failing/failed: taken out of service by someone."""
        return bool(self.flags & {"DRAIN", "FAIL"})

    @property
    def down(self) -> bool:
        return self.base == "DOWN"


@dataclass(frozen=True)
class Decision:
    action: Action
    #: the reason to drain with (DRAIN only)
    reason: str = ""
    #: why this decision, for the log and ``hwagent status``
    why: str = ""


class NodeStateError(ValueError):
    """``scontrol show node`` said something that is not one node's record."""


def parse_show_node(text: str, name: str) -> NodeState:
    """``scontrol show node -o NAME``'s one line as a ``NodeState``.

    The reason is the last field and may hold spaces and ``Key=value`` words of its own,
    so it is everything after the first `` Reason=``, less scontrol's ``[user@time]``;
    the state is read only before it (a reason saying ``State=IDLE`` changes nothing)."""
    lines = [ln for ln in text.splitlines() if ln.startswith("NodeName=")]
    if len(lines) != 1:
        raise NodeStateError(f"expected one node record for {name!r}, got {len(lines)}: {text.strip()[:200]!r}")
    line = lines[0]
    m = _NAME.match(line)
    if m is None or m.group(1) != name:
        raise NodeStateError(f"the record is of {m.group(1) if m else '?'!r}, not {name!r}")
    head, sep, reason = line.partition(" Reason=")
    state = _STATE.search(head)
    if state is None:
        raise NodeStateError(f"no State= in the record of {name!r}: {line[:200]!r}")
    base, *flags = state.group(1).replace("*", "").split("+")
    if not base:
        raise NodeStateError(f"empty State= in the record of {name!r}")
    return NodeState(name, base.upper(), frozenset(f.upper() for f in flags), _SET_BY.sub("", reason).strip() if sep
                     else "")


def is_hwagent_reason(reason: str) -> bool:
    """Whether a node's reason is one hwagent wrote (its prefix)."""
    return reason.startswith(REASON_PREFIX.rstrip()) and reason[len(REASON_PREFIX.rstrip()):][:1] in ("", " ")


def drain_reason(problems: tuple[Problem, ...]) -> str:
    """``hwagent: <first problem>`` and ``(+N more)``, at most ``MAX_REASON`` characters."""
    if not problems:
        raise ValueError("no problems: nothing to drain for")
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    text = REASON_PREFIX + problems[0].text()
    if len(text) + len(more) > MAX_REASON:
        text = text[:MAX_REASON - len(more) - 3].rstrip() + "..."
    return text + more


def decide(node: NodeState, problems: tuple[Problem, ...]) -> Decision:
    """What to ask Slurm now (module docstring): DRAIN with a reason, RESUME, or nothing."""
    ours = bool(node.reason) and is_hwagent_reason(node.reason)
    foreign = bool(node.reason) and not ours
    if problems:
        want = drain_reason(problems)
        if foreign:
            return Decision(Action.NONE, why=f"node has another reason ({node.reason!r}); left as it is")
        if node.drained and not ours:
            return Decision(Action.NONE, why="drained by someone else without a reason; left as it is")
        if ours and node.drained and node.reason == want:
            return Decision(Action.NONE, why="drained by hwagent for these problems already")
        return Decision(Action.DRAIN, want, why="drain: " + ("reason changed" if ours else "device problem"))
    if not node.drained:
        return Decision(Action.NONE, why="healthy and not drained")
    if not ours:
        return Decision(Action.NONE, why=f"drained by someone else ({node.reason or 'no reason'!r}); never resumed "
                                         "by hwagent")
    if node.down:
        return Decision(Action.NONE, why="node is down: hwagent's drain is resumed once it is back up")
    return Decision(Action.RESUME, why="healthy again: resume hwagent's own drain")
