"""The [nri] config section: hwagent as an NRI plugin of containerd / CRI-O (off by default)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.config import SectionKey

__all__ = ["NRI_SECTION", "NriConfig"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class NriConfig:
    #: off: hwagent never connects to the runtime's NRI socket
    enabled: bool = False
    #: the runtime's NRI socket (containerd's and CRI-O's default)
    socket_path: str = "/var/run/nri/nri.sock"
    #: the name the plugin registers; the runtime shows it as "<index>-<name>"
    plugin_name: str = "hwagent"
    #: two digits: the runtime calls plugins in index order (90: after most others)
    plugin_index: str = "90"
    #: seconds between tries to reach the runtime while its socket is absent or refuses
    reconnect_interval_s: float = 1.0
    #: seconds to wait for RegisterPlugin's answer (the runtime's own registration timeout is 5 s)
    register_timeout_s: float = 5.0
    #: seconds CreateContainer may take to decide before it is answered with no adjustment (the
    #: runtime gives a plugin 2 s, then runs the container without it); a decision that completes
    #: later is pushed to the running container with UpdateContainers
    answer_within_s: float = 1.0
    #: honour the opt-out annotation (hwagent.io/nri: ignore). An opted-out container runs on every
    #: CPU its parent allows, dedicated ones included: false where who may annotate a pod is not trusted
    honor_opt_out: bool = True

    def validate(self) -> None:
        if not (len(self.plugin_index) == 2 and self.plugin_index.isdigit()):
            raise ValueError(f"plugin_index must be two digits (00-99), not {self.plugin_index!r}")
        if not _NAME.match(self.plugin_name):
            raise ValueError(f"plugin_name must be letters, digits, '_', '.', '-', not {self.plugin_name!r}")
        if not self.socket_path.startswith("/"):
            raise ValueError(f"socket_path must be absolute, not {self.socket_path!r}")
        if self.reconnect_interval_s <= 0:
            raise ValueError("reconnect_interval_s must be > 0")
        if self.register_timeout_s <= 0:
            raise ValueError("register_timeout_s must be > 0")
        if not 0 < self.answer_within_s < 2:
            raise ValueError("answer_within_s must be > 0 and under the runtime's 2 s plugin timeout")


NRI_SECTION = SectionKey("nri", NriConfig)
