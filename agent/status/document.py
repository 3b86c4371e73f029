"""`hwagent status --format json`'s document, from the status service's answer (``GetStatusResponse``).

One function for both ends: the daemon's root-only HTTP socket answers this document
(agent.status.httpapi) and the CLI prints it as it comes; the CLI still turns a gRPC answer
into it when the daemon it asks serves no HTTP socket (one started before that socket
existed). Fields as protobuf's JSON mapping writes them (proto field names, every field
present, 64-bit integers as strings), each eviction's evidence decoded, and the format name.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["FORMAT", "status_document"]

FORMAT = "hwagent-status/1"


def status_document(resp: Any) -> dict[str, Any]:
    """``resp`` (a ``GetStatusResponse``) as the status document (pure)."""
    from google.protobuf.json_format import MessageToDict

    d = MessageToDict(resp, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    for ev in d.get("evictions", []):
        ev["evidence"] = json.loads(ev.pop("evidence_json") or "{}")
    d["format"] = FORMAT
    return d
