"""The DRA driver's prepare/unprepare core (``ClaimPreparer``), shared by the
kubelet's DRAPlugin service and the standalone runtime.

- **Idempotent.** A claim already prepared answers what its first prepare
  answered (its CDI file is rewritten if it went missing); unpreparing a claim
  that is not prepared is done.
- **Journaled.** The prepared claims are one state file, replaced atomically
  (``agent.statefile``: temp, fsync, rename, fsync dir) with a checksum. The
  CDI spec is written before the state names it and removed after the state
  forgets it, so a kill -9 anywhere leaves either a prepared claim with its
  spec, or no claim and at most a spec file nobody names, which the next start
  removes; a repeated prepare then gives the same answer (the devices come from
  the claim's allocation, the CDI names from its UID and devices).
- **Exclusive.** A device prepared for one claim is refused to any other until
  that claim is unprepared: the driver is the last line of defence against an
  allocation that went wrong upstream.

Where claims come from is a ``ClaimSource`` (the ``<root>/dra/`` files here;
an API server's ResourceClaims elsewhere); which devices exist and what a
container gets for each is a ``NodeDevices`` snapshot (inventory, rules, DRA
devices), read when a claim is prepared.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent.contracts.dra import ClaimRef, PreparedDevice, PrepareOutcome
from agent.devices.config import ResourceRule
from agent.devices.model import Device, Inventory
from agent.dra.catalog import DeviceKey, DraDevice
from agent.dra.cdispec import cdi_device_name, cdi_kind, claim_spec, remove_spec, spec_file_name, spec_prefix, spec_uids, write_spec
from agent.dra.claims import ClaimError, ResourceClaim
from agent.eventlog import get_logger
from agent.journal import remove_stale_temps
from agent.statefile import canonical_json, set_aside, sha256_of, write_atomic

__all__ = ["ClaimSource", "NodeDevices", "DraDriver", "STATE_VERSION", "load_state"]

log = get_logger("hwagent.dra")
STATE_VERSION = 1


class ClaimSource(Protocol):
    def claim(self, ref: ClaimRef) -> ResourceClaim:
        """The claim ``ref`` names, with its allocation; ``ClaimError`` when there is none."""


@dataclass(frozen=True)
class NodeDevices:
    inventory: Inventory
    rules: Mapping[str, ResourceRule]
    devices: Sequence[DraDevice]
    #: the node's ResourceSlices of the same reading (published with an API server)
    slices: Sequence[Mapping[str, Any]] = ()
    #: host paths of the device nodes of every device offered through DRA, healthy or not
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Prepared:
    ref: ClaimRef
    devices: tuple[PreparedDevice, ...]

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.ref.namespace, "name": self.ref.name, "uid": self.ref.uid,
                "devices": [{"requests": list(d.requests), "pool": d.pool, "device": d.device,
                             "cdi": list(d.cdi_device_ids)} for d in self.devices]}

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> _Prepared:
        ref = ClaimRef(str(raw["namespace"]), str(raw["name"]), str(raw["uid"]))
        devs = tuple(PreparedDevice(tuple(map(str, d["requests"])), str(d["pool"]), str(d["device"]),
                                    tuple(map(str, d["cdi"]))) for d in raw["devices"])
        return _Prepared(ref, devs)


def _encode(claims: Mapping[str, _Prepared]) -> bytes:
    body = {"version": STATE_VERSION, "claims": {uid: p.to_json() for uid, p in sorted(claims.items())}}
    return canonical_json({**body, "checksum": sha256_of(canonical_json(body))})


def load_state(path: Path) -> tuple[dict[str, _Prepared], str]:
    """(prepared claims, '' or why the file was set aside). A missing file is an empty state."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}, ""
    try:
        doc = json.loads(raw)
        body = {k: v for k, v in doc.items() if k != "checksum"}
        if doc.get("checksum") != sha256_of(canonical_json(body)):
            raise ValueError("checksum mismatch")
        if body.get("version") != STATE_VERSION:
            raise ValueError(f"version {body.get('version')!r}, expected {STATE_VERSION}")
        return {uid: _Prepared.from_json(p) for uid, p in body["claims"].items()}, ""
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        aside = set_aside(path)
        return {}, f"{path} is corrupt ({e}); kept as {aside}"


class DraDriver:
    """``ClaimPreparer`` over a claim source, the node's devices and a CDI directory."""

    def __init__(self, driver: str, state_path: Path, cdi_dir: str, source: ClaimSource,
                 node: Callable[[], NodeDevices]) -> None:
        self.driver = driver
        self.state_path = Path(state_path)
        self.cdi_dir = cdi_dir
        self._source = source
        self._node = node
        self._claims: dict[str, _Prepared] = {}
        self._lock = asyncio.Lock()
        self.state_error = ""

    # --- start ---------------------------------------------------------------------------

    def restore(self) -> list[str]:
        """Read the state; remove CDI specs no prepared claim names, rewrite missing ones
        where the devices are still known. Returns what was done (for the log)."""
        self.state_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # a writer killed inside write_atomic leaves its temp file: the state's, or a spec's (which a
        # container runtime reading the CDI directory would otherwise try to parse)
        remove_stale_temps(self.state_path)
        remove_stale_temps(Path(self.cdi_dir) / spec_prefix(self.driver))  # .<prefix>*.tmp-*
        self._claims, self.state_error = load_state(self.state_path)
        done = []
        if self.state_error:
            log.error("dra state unreadable", error=self.state_error)
            return [self.state_error]  # the spec files stay as the only evidence left
        try:
            names = os.listdir(self.cdi_dir)
        except FileNotFoundError:
            names = []
        for fname, uid in spec_uids(names, self.driver).items():
            if uid not in self._claims:
                remove_spec(self.cdi_dir, self.driver, uid)
                done.append(f"removed {fname}: no prepared claim {uid}")
        for uid, p in self._claims.items():
            if not (Path(self.cdi_dir) / spec_file_name(self.driver, uid)).exists():
                try:
                    self._write_spec(uid, [(d.pool, d.device) for d in p.devices], self._node())
                    done.append(f"rewrote the CDI spec of claim {uid}")
                except ClaimError as e:
                    done.append(f"claim {uid}: CDI spec missing and not rewritable: {e}")
        return done

    # --- PreparedClaims ------------------------------------------------------------------

    def prepared(self) -> Mapping[str, tuple[ClaimRef, tuple[PreparedDevice, ...]]]:
        return {uid: (p.ref, p.devices) for uid, p in self._claims.items()}

    def holder(self) -> dict[DeviceKey, str]:
        """(driver, pool, device) -> UID of the claim it is prepared for."""
        return {(self.driver, d.pool, d.device): uid for uid, p in self._claims.items() for d in p.devices}

    # --- ClaimPreparer -------------------------------------------------------------------

    async def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
        out: dict[str, PrepareOutcome] = {}
        async with self._lock:
            for ref in claims:
                try:
                    out[ref.uid] = PrepareOutcome(devices=await self._prepare_one(ref))
                except (ClaimError, OSError) as e:
                    out[ref.uid] = PrepareOutcome(error=f"claim {ref.namespace}/{ref.name}: {e}")
        return out

    async def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        out: dict[str, str] = {}
        async with self._lock:
            for ref in claims:
                try:
                    await self._unprepare_one(ref)
                    out[ref.uid] = ""
                except OSError as e:
                    out[ref.uid] = f"claim {ref.namespace}/{ref.name}: {e}"
        return out

    # --- the steps -----------------------------------------------------------------------

    async def _prepare_one(self, ref: ClaimRef) -> tuple[PreparedDevice, ...]:
        have = self._claims.get(ref.uid)
        if have is not None:
            return have.devices
        # one hop to a worker thread for all of it (claim file, devices, CDI spec, state: reads,
        # two fsynced replaces); the lock keeps every other prepare out meanwhile
        claims = await asyncio.to_thread(self._prepare_sync, ref, dict(self._claims), self.holder())
        self._claims = claims
        devices = claims[ref.uid].devices
        log.info("dra claim prepared", claim=f"{ref.namespace}/{ref.name}", uid=ref.uid,
                 devices=",".join(d.device for d in devices))
        return devices

    def _prepare_sync(self, ref: ClaimRef, claims: dict[str, _Prepared],
                      held: Mapping[DeviceKey, str]) -> dict[str, _Prepared]:
        claim = self._source.claim(ref)
        if claim.uid != ref.uid:
            raise ClaimError(f"the claim's UID is {claim.uid}, not {ref.uid} (it was re-created)")
        if claim.allocation is None:
            raise ClaimError("it is not allocated (status.allocation is empty)")
        mine = [r for r in claim.allocation if r.driver == self.driver]
        for r in mine:
            other = held.get((r.driver, r.pool, r.device))
            if other is not None and other != ref.uid:
                raise ClaimError(f"device {r.device} (pool {r.pool}) is prepared for claim {other}")
        pairs = list(dict.fromkeys((r.pool, r.device) for r in mine))
        self._write_spec(ref.uid, pairs, self._node())
        devices = tuple(
            PreparedDevice(tuple(r.request for r in mine if (r.pool, r.device) == (pool, dev)), pool, dev,
                           (f"{cdi_kind(self.driver)}={cdi_device_name(ref.uid, dev)}",))
            for pool, dev in pairs)
        claims[ref.uid] = _Prepared(ref, devices)
        write_atomic(self.state_path, _encode(claims))
        return claims

    def _write_spec(self, uid: str, pairs: Sequence[tuple[str, str]], node: NodeDevices) -> None:
        by_key = {(d.pool, d.name): d for d in node.devices}
        parts: list[tuple[str, ResourceRule, Device]] = []
        for pool, name in pairs:
            d = by_key.get((pool, name))
            if d is None:
                raise ClaimError(f"device {name} (pool {pool}) is not a healthy device of this node")
            dev = node.inventory.get(d.inventory_id)
            rule = node.rules.get(d.resource)
            if dev is None or rule is None:
                raise ClaimError(f"device {name} (pool {pool}) is gone from the inventory")
            parts.append((name, rule, dev))
        write_spec(self.cdi_dir, self.driver, uid, claim_spec(self.driver, uid, parts))

    def _unprepare_sync(self, uid: str, claims: Mapping[str, _Prepared]) -> None:
        write_atomic(self.state_path, _encode(claims))  # forgotten first: a kill -9 then leaves an orphan spec
        remove_spec(self.cdi_dir, self.driver, uid)

    async def _unprepare_one(self, ref: ClaimRef) -> None:
        if ref.uid not in self._claims:
            return
        claims = {k: v for k, v in self._claims.items() if k != ref.uid}
        await asyncio.to_thread(self._unprepare_sync, ref.uid, claims)
        self._claims = claims
        log.info("dra claim unprepared", claim=f"{ref.namespace}/{ref.name}", uid=ref.uid)
