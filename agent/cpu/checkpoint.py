"""The policy's checkpoint: ``<root>/cpu/cpu_plugin_state.json``.

Format (version 1): ``{"version":1, "policy":"dynamic", "data":{pools, pod_entries},
"checksum":"sha256:<hex>"}`` where the checksum covers the canonical JSON
(sorted keys, no spaces) of version, policy and data. Upstream's checksum is an
FNV-32a over a Go-specific struct dump that Python cannot reproduce, so files are
not interchangeable with Katalyst's (docs/cpu-policy.md).

Writes are atomic: temp file in the same directory, fsync, rename, fsync the
directory. A file that fails to parse or verify stops start-up with a message
saying what to do, unless the caller accepts the loss; then the bad file is
kept aside (never overwritten) and the policy starts empty.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from agent.cpu.state import PolicyState

__all__ = ["CheckpointError", "CheckpointStore", "FILE_NAME", "VERSION"]

FILE_NAME = "cpu_plugin_state.json"
VERSION = 1
POLICY = "dynamic"
log = logging.getLogger("hwagent.cpu")


class CheckpointError(Exception):
    """The checkpoint exists but cannot be trusted."""


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _checksum(version: int, policy: str, data: Any) -> str:
    body = _canonical({"version": version, "policy": policy, "data": data})
    return "sha256:" + hashlib.sha256(body).hexdigest()


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _data_json(state: PolicyState) -> str:
    """Canonical JSON of ``state.to_json()``, assembled from per-entry cached
    encodings (byte-identical to ``_canonical(state.to_json())``)."""
    pods = ",".join(
        _dumps(uid) + ":{" + ",".join(_dumps(c) + ":" + a.encoded() for c, a in sorted(pod.items())) + "}"
        for uid, pod in sorted(state.entries.items())
    )
    pools = _dumps({k: str(v) for k, v in state.pools.items()})
    return '{"pod_entries":{' + pods + '},"pools":' + pools + "}"


def encode(state: PolicyState) -> bytes:
    data = _data_json(state)
    signed = '{"data":' + data + ',"policy":' + _dumps(POLICY) + ',"version":' + str(VERSION) + "}"
    checksum = "sha256:" + hashlib.sha256(signed.encode()).hexdigest()
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
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
            os.replace(self.path, aside)
            log.warning("checkpoint_discarded path=%s kept_as=%s reason=%r", self.path, aside, str(e))
            return None

    def save(self, state: PolicyState) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        body = encode(state)
        tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(body)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
