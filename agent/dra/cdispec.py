"""The CDI spec of one prepared claim (pure), and its file (thin adapter).

One spec file per claim, kind ``<driver>/claim``, one CDI device per
allocated device named ``<claim uid>-<device>``: its device nodes (the
resource rule's ``dev_nodes``, ``extra_dev_nodes`` and permissions) and
mounts; the env of the claim's devices per resource (the rule's templates
over all of them, as the device plugin's Allocate gives one container) is in
the spec's top-level ``containerEdits``, which CDI applies once whenever any
of the spec's devices is used. The spec is CDI 1.0.0 (``hostPath`` in device
nodes; readable by ``agent.runtime.cdi`` and by container runtimes).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agent.devices.config import ResourceRule
from agent.devices.model import Device
from agent.devices.rules import grant
from agent.statefile import write_atomic

__all__ = ["CDI_VERSION", "cdi_kind", "cdi_device_name", "spec_file_name", "spec_prefix", "claim_spec", "write_spec",
           "remove_spec", "spec_uids"]

CDI_VERSION = "1.0.0"


def cdi_kind(driver: str) -> str:
    return f"{driver}/claim"


def cdi_device_name(claim_uid: str, device: str) -> str:
    return f"{claim_uid}-{device}"


def spec_prefix(driver: str) -> str:
    """What every spec file name of ``driver`` starts with."""
    return f"{driver}-claim-"


def spec_file_name(driver: str, claim_uid: str) -> str:
    return f"{spec_prefix(driver)}{claim_uid}.json"


def spec_uids(names: Iterable[str], driver: str) -> dict[str, str]:
    """file name -> claim UID for the spec files of ``driver`` among ``names``."""
    prefix, suffix = spec_prefix(driver), ".json"
    return {n: n[len(prefix):-len(suffix)] for n in names
            if n.startswith(prefix) and n.endswith(suffix) and len(n) > len(prefix) + len(suffix)}


def claim_spec(driver: str, claim_uid: str,
               devices: Sequence[tuple[str, ResourceRule, Device]]) -> dict[str, Any]:
    """The spec for a claim's devices: (DRA device name, its resource rule, its inventory device)."""
    entries = []
    for name, rule, dev in devices:
        g = grant(rule, [dev])
        edits: dict[str, Any] = {}
        if g.devices:
            edits["deviceNodes"] = [{"path": n.container_path, "hostPath": n.host_path, "permissions": n.permissions}
                                    for n in g.devices]
        entries.append({"name": cdi_device_name(claim_uid, name), "containerEdits": edits})
    env: dict[str, str] = {}
    mounts: dict[str, dict[str, Any]] = {}
    by_rule: dict[str, tuple[ResourceRule, list[Device]]] = {}
    for _, rule, dev in devices:
        by_rule.setdefault(rule.name, (rule, []))[1].append(dev)
    for rule, devs in by_rule.values():
        g = grant(rule, devs)
        env.update(g.envs)
        for m in g.mounts:
            mounts[m.container_path] = {"hostPath": m.host_path, "containerPath": m.container_path,
                                        "options": ["ro" if m.read_only else "rw", "bind"]}
    common: dict[str, Any] = {}
    if env:
        common["env"] = [f"{k}={v}" for k, v in sorted(env.items())]
    if mounts:
        common["mounts"] = [mounts[k] for k in sorted(mounts)]
    spec: dict[str, Any] = {"cdiVersion": CDI_VERSION, "kind": cdi_kind(driver), "devices": entries}
    if common:
        spec["containerEdits"] = common
    return spec


def write_spec(cdi_dir: str | os.PathLike[str], driver: str, claim_uid: str, spec: Mapping[str, Any]) -> Path:
    """Write the claim's spec atomically (temp, fsync, rename): a runtime reading the directory
    sees no spec or the whole one. 0644: container runtimes read it as another user."""
    d = Path(cdi_dir)
    d.mkdir(parents=True, exist_ok=True)
    path = d / spec_file_name(driver, claim_uid)
    write_atomic(path, json.dumps(spec, indent=2, sort_keys=True).encode() + b"\n", mode=0o644)
    return path


def remove_spec(cdi_dir: str | os.PathLike[str], driver: str, claim_uid: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        (Path(cdi_dir) / spec_file_name(driver, claim_uid)).unlink()
