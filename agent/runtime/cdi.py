"""CDI device names (``vendor.com/class=name``) resolved from CDI spec files.

A device plugin may answer Allocate with CDI names instead of (or besides)
device nodes. hwagent has no container runtime to hand them to, so it reads
the specs itself: every ``*.json``/``*.yaml`` in the spec directories
(``/etc/cdi``, then ``/var/run/cdi``; a later directory wins on a clash, as
the CDI spec says), and applies the device's ``containerEdits`` plus its
spec's top-level ``containerEdits``: device nodes, env, bind mounts. Hooks
and other edits are not supported and named in the error when a device
needs them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.contracts.pods import DeviceNode, Mount

__all__ = ["CDIError", "CDIEdits", "resolve"]


class CDIError(Exception):
    """A CDI name that no spec defines, or a spec that cannot be read."""


@dataclass(frozen=True)
class CDIEdits:
    env: Mapping[str, str] = field(default_factory=dict)
    devices: tuple[DeviceNode, ...] = ()
    mounts: tuple[Mount, ...] = ()


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml  # PyYAML: only when a YAML spec is present

            data = yaml.safe_load(text)
    except Exception as e:  # noqa: BLE001 - OSError, JSON and YAML errors: all mean "unreadable"
        raise CDIError(f"CDI spec {path} is unreadable: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        raise CDIError(f"CDI spec {path} has no 'kind'")
    return data


def _index(dirs: Iterable[str]) -> dict[str, tuple[Path, dict[str, Any], dict[str, Any]]]:
    """qualified name -> (spec file, spec, device entry)."""
    out: dict[str, tuple[Path, dict[str, Any], dict[str, Any]]] = {}
    for d in dirs:
        try:
            files = sorted(p for p in Path(d).iterdir() if p.suffix in (".json", ".yaml", ".yml"))
        except OSError:
            continue
        for f in files:
            spec = _load(f)
            for dev in spec.get("devices") or ():
                if isinstance(dev, dict) and isinstance(dev.get("name"), str):
                    out[f"{spec['kind']}={dev['name']}"] = (f, spec, dev)
    return out


_SUPPORTED = {"deviceNodes", "env", "mounts"}


def _apply(edits: Mapping[str, Any], where: str, env: dict[str, str], devs: list[DeviceNode],
           mounts: list[Mount]) -> None:
    unsupported = sorted(k for k, v in edits.items() if v and k not in _SUPPORTED)
    if unsupported:
        raise CDIError(f"{where}: containerEdits {', '.join(unsupported)} are not supported by hwagent")
    for e in edits.get("env") or ():
        k, sep, v = str(e).partition("=")
        if sep:
            env[k] = v
    for n in edits.get("deviceNodes") or ():
        path = n["path"]
        devs.append(DeviceNode(container_path=path, host_path=n.get("hostPath") or path,
                               permissions=n.get("permissions") or "rwm"))
    for m in edits.get("mounts") or ():
        opts = m.get("options") or []
        mounts.append(Mount(container_path=m["containerPath"], host_path=m["hostPath"], read_only="ro" in opts))


def resolve(names: Iterable[str], dirs: Iterable[str]) -> CDIEdits:
    names = list(names)
    if not names:
        return CDIEdits()
    dirs = list(dirs)
    index = _index(dirs)
    env: dict[str, str] = {}
    devs: list[DeviceNode] = []
    mounts: list[Mount] = []
    seen_specs: set[Path] = set()
    for name in names:
        if name not in index:
            where = ", ".join(dirs) or "no directories"
            raise CDIError(f"CDI device {name!r} is not defined by any spec in {where}")
        path, spec, dev = index[name]
        if path not in seen_specs:
            seen_specs.add(path)
            _apply(spec.get("containerEdits") or {}, f"{path}", env, devs, mounts)
        _apply(dev.get("containerEdits") or {}, f"{path} device {name}", env, devs, mounts)
    return CDIEdits(env=env, devices=tuple(devs), mounts=tuple(mounts))
