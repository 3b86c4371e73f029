"""Is the kubelet's own CPU manager in the way of hwagent's NRI placement? (a pure decision, a thin reader)

On an NRI node hwagent decides every container's cpuset. The kubelet's CPU
manager must then be ``none``: its ``static`` policy gives Guaranteed pods with
integer CPUs exclusive cpusets itself, through the runtime
(``UpdateContainerResources``), and its reconcile loop re-applies its own idea
of every container's cpuset every ~10 s. Both placing would overwrite each
other's cpusets within seconds and hand the same CPUs out twice.

So hwagent *refuses to place* (answers no adjustment, names and signals still
work) while the kubelet's policy is anything but ``none``, and says so, with the
fix, in `hwagent status` and `hwagent doctor`. Warning and placing anyway was
rejected: the result would be neither hwagent's placement nor the kubelet's.

Two witnesses, under the kubelet's root dir:
- ``cpu_manager_state``: the kubelet's checkpoint (JSON, ``policyName``), what the
  running (or last) kubelet enforces. The kubelet refuses to start when its
  configured policy differs from this file, so it is the truth of the running node.
- the kubelet's config file (``config.yaml``, a KubeletConfiguration,
  ``cpuManagerPolicy``; absent means ``none``), what the next kubelet start enforces.

Either saying ``static`` is a conflict. A file that cannot be read or parsed is
reported and decides nothing (no conflict is assumed from noise).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["STATE_FILE", "CONFIG_FILE", "KubeletCpuManager", "Verdict", "decide", "read", "check"]

STATE_FILE = "cpu_manager_state"
CONFIG_FILE = "config.yaml"
#: neither file is anywhere near this: a bigger one is not the kubelet's
_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class KubeletCpuManager:
    """What the kubelet's files say ("": no such file, or no such key in the config)."""

    state_path: str
    state_policy: str = ""
    config_path: str = ""
    config_policy: str = ""
    #: why a file that exists could not be read ("<path>: <why>")
    errors: tuple[str, ...] = ()
    #: the state file or the config file exists: there is (or was) a kubelet on this node
    found: bool = False


@dataclass(frozen=True)
class Verdict:
    #: the kubelet's CPU manager places CPUs too: hwagent must not
    conflict: bool
    #: one line: what was found
    detail: str
    #: what to do ("" when nothing is wrong)
    fix: str = ""
    #: False when a file could not be read: the answer is "not known", not "no conflict"
    certain: bool = True


def decide(found: KubeletCpuManager) -> Verdict:
    """The conflict, from what the files say (pure)."""
    if not found.found and not found.errors:
        return Verdict(False, f"no kubelet state at {found.state_path} (no kubelet CPU manager on this node)")
    said = []
    if found.state_policy:
        said.append(f"{found.state_path} policyName={found.state_policy}")
    if found.config_policy:
        said.append(f"{found.config_path} cpuManagerPolicy={found.config_policy}")
    bad = [p for p in (found.state_policy, found.config_policy) if p and p.lower() != "none"]
    errors = "; ".join(found.errors)
    if not bad and errors:
        return Verdict(False, f"the kubelet's CPU manager policy is not known: {errors}"
                       + (f" (readable: {', '.join(said)})" if said else ""),
                       "make the kubelet's files readable by root (hwagent places nothing differently meanwhile)",
                       certain=False)
    if not bad:
        return Verdict(False, f"kubelet CPU manager policy none ({', '.join(said)})")
    where = found.config_path if found.config_policy else "the file its --config names"
    fix = (f"set cpuManagerPolicy: none in the kubelet's config ({where}), "
           f"stop the kubelet, remove {found.state_path}, start the kubelet (it refuses a policy that differs "
           "from its checkpoint); hwagent places the node's pods through NRI instead")
    detail = (f"the kubelet's CPU manager is {bad[0]} ({', '.join(said)}): it sets cpusets itself, so hwagent's "
              "NRI placement is refused (no adjustment) until it is none")
    return Verdict(True, detail + (f"; unreadable: {errors}" if errors else ""), fix)


def _read_text(path: Path) -> str | None:
    """The file's text; None when it does not exist; OSError/ValueError for one that cannot be read."""
    try:
        with path.open("rb") as f:
            data = f.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(data) > _MAX_BYTES:
        raise ValueError(f"larger than {_MAX_BYTES} bytes")
    return data.decode()


def _policy(doc: Any, key: str) -> str:
    if not isinstance(doc, dict):
        raise ValueError("not a mapping")
    value = doc.get(key, "")
    if not isinstance(value, str):
        raise ValueError(f"{key} is not a string")
    return value.strip()


def read(kubelet_root: str | Path = "/var/lib/kubelet", config_path: str | Path | None = None) -> KubeletCpuManager:
    """What ``<kubelet_root>/cpu_manager_state`` and the kubelet's config file (default
    ``<kubelet_root>/config.yaml``) say of the CPU manager policy."""
    import yaml

    root = Path(kubelet_root)
    state, config = root / STATE_FILE, Path(config_path) if config_path else root / CONFIG_FILE
    errors: list[str] = []
    state_policy = config_policy = ""
    found = False
    try:
        text = _read_text(state)
        if text is not None:
            found = True
            state_policy = _policy(json.loads(text), "policyName")
            if not state_policy:
                raise ValueError("no policyName")
    except (OSError, ValueError, UnicodeDecodeError) as e:
        errors.append(f"{state}: {e}")
    try:
        text = _read_text(config)
        if text is not None:
            found = True
            doc = yaml.safe_load(text)
            # a config without the key is the kubelet's default, none
            config_policy = _policy(doc, "cpuManagerPolicy") or "none"
    except (OSError, ValueError, UnicodeDecodeError, yaml.YAMLError) as e:
        errors.append(f"{config}: {e}")
    return KubeletCpuManager(str(state), state_policy, str(config), config_policy, tuple(errors), found)


def check(kubelet_root: str | Path = "/var/lib/kubelet", config_path: str | Path | None = None) -> Verdict:
    """Read, then decide."""
    return decide(read(kubelet_root, config_path))
