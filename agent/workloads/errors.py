"""Admission errors, carrying the gRPC status code they map to (by name).

The mapping (docs/admission.md):

| code | when |
|---|---|
| INVALID_ARGUMENT | the manifest is malformed or invalid (the field is named), bad QoS annotations |
| ALREADY_EXISTS | a pod with that namespace/name (or UID) is already admitted or being admitted |
| NOT_FOUND | Get/Remove/Stop of a pod that is not in the registry |
| RESOURCE_EXHAUSTED | the request cannot be met on this node now or ever: more CPUs or memory than exist, a device nobody registered or not enough free, a NUMA alignment the policy cannot satisfy; a user at its pod or log-bytes cap (``agent.workloads.quota``) |
| FAILED_PRECONDITION | the node is not ready for it (reclaim pool not ready, no runtime to stop a pod) |
| UNAVAILABLE | a device plugin failed or went away during the admission (retry) |
| ABORTED | the admission raced with a change it could not survive (retry) |
| DEADLINE_EXCEEDED | a device plugin's PreStartContainer timed out |
| INTERNAL | persisting the decision failed (nothing was kept) |

Our own code never answers UNKNOWN.
"""

from __future__ import annotations

__all__ = ["AdmissionError", "CODES"]

CODES = (
    "INVALID_ARGUMENT",
    "ALREADY_EXISTS",
    "NOT_FOUND",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "PERMISSION_DENIED",
    "UNAVAILABLE",
    "ABORTED",
    "DEADLINE_EXCEEDED",
    "INTERNAL",
)


class AdmissionError(Exception):
    """A request admission refuses; nothing was changed when it is raised.

    ``reason`` is a short bounded token for metrics; the message is the one line
    the user sees. ``detail``: the message without a provider's own free amounts (a
    memory refusal's), for admission, which ends a refusal with what every resource the
    pod asks for has free; the message when not given."""

    def __init__(self, code: str, message: str, reason: str = "", detail: str | None = None) -> None:
        if code not in CODES:
            code = "INTERNAL"
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or code.lower()
        self.detail = message if detail is None else detail

    def __str__(self) -> str:
        return self.message
