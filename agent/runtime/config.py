"""The [runtime] config section: where workload cgroups live, limits, logs, back-off."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agent.config import SectionKey


@dataclass(frozen=True)
class RuntimeConfig:
    enabled: bool = True
    #: pids.max of each container (0 = no limit); contains fork bombs
    pids_max: int = 4096
    #: a container's log is rotated when it would grow past this many bytes (0 = never)
    log_max_bytes: int = 10 * 1024 * 1024
    #: rotated files kept per container (<container>.log.1 ... .N)
    log_keep: int = 4
    #: false: stopping hwagent leaves workloads running (re-attached at the next start;
    #: the unit needs KillMode=process); true: stop every workload first (KillMode=mixed)
    stop_workloads_on_exit: bool = False
    #: crash-loop back-off, as the kubelet's: first delay, doubling up to the max,
    #: reset after a container ran this long
    backoff_initial_s: float = 10.0
    backoff_max_s: float = 300.0
    backoff_reset_s: float = 600.0
    #: managed: deny only managed, not granted device nodes; strict: deny all, allow defaults + granted
    device_policy: Literal["managed", "strict"] = "managed"
    #: BPF device programs (bcc) on the v2 cgroup: auto = on a pure v2 host (no devices
    #: controller there); always = also on hybrid, beside v1's devices controller; never
    devices_bpf: Literal["auto", "always", "never"] = "auto"
    #: device nodes (globs under /dev) hwagent treats as managed besides those its device plugins hand out
    managed_devices: tuple[str, ...] = ()
    #: the exec shim; empty = hwagent-shim next to the Python interpreter, else the Python fallback;
    #: "python" = the Python fallback (agent/runtime/shim.py) whatever is built
    shim: str = ""
    #: CDI spec directories, searched in order (a later directory's spec wins on a name clash)
    cdi_spec_dirs: tuple[str, ...] = ("/etc/cdi", "/var/run/cdi")
    #: how long a cgroup kill waits for the last process to go
    kill_timeout_s: float = 5.0


#: ``config[RUNTIME_SECTION]``, the [runtime] section
RUNTIME_SECTION: SectionKey[RuntimeConfig] = SectionKey("runtime", RuntimeConfig)
