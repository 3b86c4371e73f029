"""Device access on cgroup v2: a BPF_PROG_TYPE_CGROUP_DEVICE program per rule set (bcc).

v2 has no devices controller; the kernel asks a BPF program attached to the
cgroup on every open/mknod of a device node (return 0 = EPERM). The program is
generated from the same rules as v1's devices.allow/deny (agent.cgroups.limits):
``managed`` denies the listed nodes and allows the rest, ``strict`` allows the
listed nodes for their access and denies the rest. Programs are compiled once
per distinct rule set (bcc/clang, ~0.5 s, in an executor) and the same program
is attached to every cgroup with that rule set. Attachments made with
BPF_PROG_ATTACH are held by the cgroup, so they outlive the daemon's process
and survive kill -9 like the workloads do.

Only the UAPI context struct is used (stable across kernels), so a mismatch
between installed headers and the running kernel does not matter here.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.cgroups.limits import CgroupLimits, DeviceRule

__all__ = ["DeviceProgramError", "program_source", "DevicePrograms"]

#: BPF_DEVCG_DEV_BLOCK / _CHAR and BPF_DEVCG_ACC_MKNOD / _READ / _WRITE (include/uapi/linux/bpf.h)
_TYPE = {"b": 1, "c": 2}
_ACCESS = {"m": 1, "r": 2, "w": 4}


class DeviceProgramError(Exception):
    """The device program could not be built or attached (bcc missing, verifier, attach)."""


def _mask(access: str) -> int:
    return sum(v for k, v in _ACCESS.items() if k in access)


def _match(rule: DeviceRule) -> str:
    conds = []
    if rule.kind != "a":
        conds.append(f"type == {_TYPE[rule.kind]}")
    if rule.major is not None:
        conds.append(f"ctx->major == {rule.major}")
    if rule.minor is not None:
        conds.append(f"ctx->minor == {rule.minor}")
    return " && ".join(conds) or "1"


def program_source(policy: str, allow: Sequence[DeviceRule], deny: Sequence[DeviceRule]) -> str:
    """C for bcc: first matching rule decides; the default is the policy's."""
    lines = ["int hwagent_devices(struct bpf_cgroup_dev_ctx *ctx) {",
             "    u32 type = ctx->access_type & 0xFFFF;",
             "    u32 access = ctx->access_type >> 16;"]
    if policy == "strict":
        for r in allow:
            lines.append(f"    if ({_match(r)} && (access & ~{_mask(r.access)}) == 0) return 1;")
        lines.append("    return 0;")
    else:
        for r in deny:
            if r.kind == "a":
                continue
            lines.append(f"    if ({_match(r)}) return 0;")
        lines.append("    return 1;")
    lines.append("}")
    return "\n".join(lines) + "\n"


class DevicePrograms:
    """Compiled programs by source, attached to v2 cgroup directories."""

    def __init__(self) -> None:
        self._progs: dict[str, tuple[Any, Any]] = {}
        self._lock = threading.Lock()

    def _load(self, src: str) -> tuple[Any, Any]:
        with self._lock:
            if src not in self._progs:
                try:
                    from bcc import BPF
                except ImportError as e:
                    raise DeviceProgramError(f"device access on cgroup v2 needs bcc (python3-bpfcc): {e}") from None
                try:
                    b = BPF(text=src.encode())
                    fn = b.load_func(b"hwagent_devices", BPF.CGROUP_DEVICE)
                except Exception as e:  # noqa: BLE001 - bcc raises Exception for compile/verifier errors
                    raise DeviceProgramError(f"device program did not load: {e}") from None
                self._progs[src] = (b, fn)
            return self._progs[src]

    @staticmethod
    def needed(limits: CgroupLimits) -> bool:
        return bool(limits.device_allow or limits.device_deny)

    def prepare(self, limits: CgroupLimits) -> None:
        """Compile the program for these rules if not done yet (blocking: run it in an executor)."""
        if self.needed(limits):
            self._load(program_source(limits.device_policy, limits.device_allow, limits.device_deny))

    def ready(self, limits: CgroupLimits) -> bool:
        return not self.needed(limits) or program_source(
            limits.device_policy, limits.device_allow, limits.device_deny) in self._progs

    def attach(self, cgroup_dir: Path, limits: CgroupLimits) -> None:
        """Attach the program for ``limits``' device rules to a v2 cgroup (compiles when not prepared)."""
        if not self.needed(limits):
            return
        _b, fn = self._load(program_source(limits.device_policy, limits.device_allow, limits.device_deny))
        from bcc import BPF, BPFAttachType

        fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            BPF.attach_func(fn, fd, BPFAttachType.CGROUP_DEVICE)
        except Exception as e:  # noqa: BLE001
            raise DeviceProgramError(f"cannot attach the device program to {cgroup_dir}: {e}") from None
        finally:
            os.close(fd)
