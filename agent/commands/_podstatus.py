"""A pod's one-word STATUS, as ``kubectl get pods`` prints it (pure, over the CLI API's pod, ``agent.workloads.podjson``).

The phase alone hides what happened: a pod whose container waits out a crash
loop is Running, and so is one whose container cannot start. The word is the
kubectl printer's: the pod's reason or phase, then an init container's trouble
(``Init:Error``, ``Init:CrashLoopBackOff``, ``Init:0/2``), then the last app
container's waiting or terminated reason (``CrashLoopBackOff``, ``OOMKilled``,
``Completed``, ``Error``, ``StartError``). The node's own verdicts on the
whole pod (Evicted, Stopped, Removed) stay in front, as ``Evicted`` does in
kubectl.
"""

from __future__ import annotations


#: typing is not imported at run time: it is ~3 ms of the CLI's start-up (bench/cli.py); mypy reads this name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["status_word", "restarts", "POD_VERDICTS"]

#: pod reasons that say more than any container's: the node ended the pod
POD_VERDICTS = frozenset({"Evicted", "Stopped", "Removed"})


def _terminated_word(c: Mapping[str, Any]) -> str:
    if c.get("reason"):
        return str(c["reason"])
    code = c.get("exit_code")
    if code is not None and code > 128:
        return f"Signal:{code - 128}"
    return f"ExitCode:{code}"


def status_word(pod: Mapping[str, Any]) -> str:
    if pod.get("reason") in POD_VERDICTS:
        return str(pod["reason"])
    word = str(pod.get("reason") or pod.get("phase") or "Unknown")
    if word == "Admitted":
        word = str(pod.get("phase") or word)
    containers = pod.get("containers") or []
    inits = [c for c in containers if c.get("kind") == "init"]
    apps = [c for c in containers if c.get("kind") != "init"]
    for i, c in enumerate(inits):
        if c.get("state") == "terminated" and c.get("exit_code") == 0:
            continue
        if c.get("state") == "terminated":
            return "Init:" + _terminated_word(c)
        if c.get("state") == "waiting" and c.get("reason") not in ("", None, "PodInitializing"):
            return "Init:" + str(c["reason"])
        return f"Init:{i}/{len(inits)}"
    running = False
    for c in reversed(apps):
        state, reason = c.get("state"), c.get("reason")
        if state == "waiting" and reason:
            word = str(reason)
        elif state == "terminated":
            word = _terminated_word(c)
        elif state == "running":
            running = True
    if word == "Completed" and running:
        return "Running"
    return word


def restarts(pod: Mapping[str, Any]) -> int:
    """RESTARTS: the app containers' restarts, summed (as kubectl's column)."""
    return sum(int(c.get("restart_count") or 0) for c in pod.get("containers") or [] if c.get("kind") != "init")
