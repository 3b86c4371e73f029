"""The policy's checkpoint: ``<root>/cpu/cpu_plugin_state.json``.

Format (version 1): ``{"version":1, "policy":"dynamic", "data":{pools, pod_entries},
"checksum":"sha256:<hex>"}`` where the checksum covers the canonical JSON
(sorted keys, no spaces) of version, policy and data. Upstream's checksum is an
FNV-32a over a Go-specific struct dump that Python cannot reproduce, so files are
not interchangeable with Katalyst's (docs/cpu-policy.md).

Writes are atomic: temp file in the same directory, fsync, rename, fsync the
directory (``agent.statefile``). A file that fails to parse or verify stops
start-up with a message saying what to do, unless the caller accepts the loss;
then the bad file is kept aside as ``<name>.corrupt-<UTC time>`` (never
overwritten) and the policy starts empty. The canonical JSON escapes non-ASCII
(``ensure_ascii``), part of format version 1.
"""

from __future__ import annotations

import json
import logging
import os
from functools import partial
from pathlib import Path
from typing import Any

from agent.cpu.state import PolicyState
from agent.statefile import canonical_str, set_aside, sha256_checksum, sha256_of, write_atomic

__all__ = ["CheckpointError", "CheckpointStore", "FILE_NAME", "VERSION"]

FILE_NAME = "cpu_plugin_state.json"
VERSION = 1
POLICY = "dynamic"
log = logging.getLogger("hwagent.cpu")


class CheckpointError(Exception):
    """The checkpoint exists but cannot be trusted."""


def _checksum(version: int, policy: str, data: Any) -> str:
    return sha256_checksum({"version": version, "policy": policy, "data": data}, ensure_ascii=True)


_dumps = partial(canonical_str, ensure_ascii=True)


def _data_json(state: PolicyState) -> str:
    """Canonical JSON of ``state.to_json()``, assembled from per-entry cached
    encodings (byte-identical to ``canonical_json(state.to_json(), ensure_ascii=True)``)."""
    pods = ",".join(
        _dumps(uid) + ":{" + ",".join(_dumps(c) + ":" + a.encoded() for c, a in sorted(pod.items())) + "}"
        for uid, pod in sorted(state.entries.items())
    )
    pools = _dumps({k: str(v) for k, v in state.pools.items()})
    return '{"pod_entries":{' + pods + '},"pools":' + pools + "}"


def encode(state: PolicyState) -> bytes:
    data = _data_json(state)
    signed = '{"data":' + data + ',"policy":' + _dumps(POLICY) + ',"version":' + str(VERSION) + "}"
    checksum = sha256_of(signed.encode())
    doc = '{"checksum":' + _dumps(checksum) + ',"data":' + data + ',"policy":' + _dumps(POLICY)
    return (doc + ',"version":' + str(VERSION) + "}\n").encode()


def decode(raw: bytes) -> PolicyState:
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise CheckpointError("top level is not a JSON object")
    version = doc.get("version")
    if version != VERSION:
        raise CheckpointError(f"unsupported format version {version!r} (this hwagent reads version {VERSION})")
    if doc.get("policy") != POLICY:
        raise CheckpointError(f"written by policy {doc.get('policy')!r}, not {POLICY!r}")
    data = doc.get("data")
    if doc.get("checksum") != _checksum(VERSION, POLICY, data):
        raise CheckpointError("checksum mismatch, the file is corrupted")
    try:
        return PolicyState.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CheckpointError(f"entries do not parse ({type(e).__name__}: {e})") from None


class CheckpointStore:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.dir = Path(directory)
        self.path = self.dir / FILE_NAME

    def load(self, accept_loss: bool = False) -> PolicyState | None:
        """The saved state, or None when there is none (or it was given up)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return decode(raw)
        except CheckpointError as e:
            if not accept_loss:
                raise CheckpointError(
                    f"cpu checkpoint {self.path} cannot be used: {e}. The cpu allocations it held are unknown. "
                    f"Drain this node (or stop its workloads), then either delete the file or start hwagent with "
                    f"[cpu] accept_state_loss = true (the file is then kept as {self.path.name}.corrupt-<time> "
                    f"and the policy starts empty)."
                ) from None
            aside = set_aside(self.path)
            log.warning("checkpoint_discarded path=%s kept_as=%s reason=%r", self.path, aside, str(e))
            return None

    def save(self, state: PolicyState) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, encode(state))
