"""Errors the policy raises, carrying the gRPC status they map to.

The core never imports grpc; it names the code as a string so the server can map
it and metrics can count failures by a bounded ``reason``.
"""

from __future__ import annotations

__all__ = ["PolicyError", "INVALID_ARGUMENT", "NOT_FOUND", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED", "UNAVAILABLE"]

INVALID_ARGUMENT = "INVALID_ARGUMENT"
NOT_FOUND = "NOT_FOUND"
FAILED_PRECONDITION = "FAILED_PRECONDITION"
RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
#: the change could not be made durable (disk full, I/O error): nothing changed, retry later
UNAVAILABLE = "UNAVAILABLE"


class PolicyError(Exception):
    """A request the policy refuses. State is unchanged when this is raised."""

    def __init__(self, code: str, reason: str, message: str) -> None:
        super().__init__(message)
        #: gRPC status code name
        self.code = code
        #: short bounded token for metrics labels (e.g. "bad_quantity")
        self.reason = reason
        self.message = message

    def __str__(self) -> str:
        return self.message


def invalid(reason: str, message: str) -> PolicyError:
    return PolicyError(INVALID_ARGUMENT, reason, message)
