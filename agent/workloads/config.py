"""The [workloads] config section: standalone admission (docs/admission.md)."""

from __future__ import annotations

from dataclasses import dataclass

from agent.config import SectionKey

__all__ = ["WORKLOADS_SECTION", "WorkloadsConfig"]


@dataclass(frozen=True)
class WorkloadsConfig:
    #: serve standalone admission (standalone mode only; the kubelet admits in kubelet mode)
    enabled: bool = True
    #: the admission API socket; "" = <root_dir>/admission.sock
    socket_path: str = ""
    #: members of this group may connect to the admission socket (mode 0660) and run pods
    #: as themselves; "" or a group that does not exist: root only (0600)
    socket_group: str = "hwagent"
    #: static pod manifests; "" = <root_dir>/manifests
    manifest_dir: str = ""
    #: how often the manifest directory is compared with what is admitted from it
    manifest_poll_seconds: float = 2.0
    #: static manifests: ignore unknown fields with a warning instead of refusing the file
    manifest_ignore_unknown_fields: bool = False
    #: a corrupt registry record is kept aside and skipped instead of stopping start
    accept_state_loss: bool = False
    #: pods a user other than root may hold at once, in any state until removed (0 = no cap);
    #: the next is refused (RESOURCE_EXHAUSTED). Root's own requests are not capped
    max_pods_per_user: int = 256
    #: log bytes a user other than root may hold (its pods' log directories, measured at its
    #: next admission, which is refused beyond; 0 = no cap)
    max_log_bytes_per_user: int = 1 << 30
    #: retention of ended pods not removed (a static manifest's are kept): beyond any of these
    #: the oldest ended pods are removed, logs and all, as `hwagent rm` would (0 = no limit)
    ended_pods_per_user: int = 100
    ended_pods_total: int = 1000
    ended_pods_max_age_s: float = 0.0
    ended_pods_log_bytes: int = 2 << 30
    #: connections one non-root user may hold at once on admission.sock and cli.sock together
    #: (agent.workloads.connlimit); root is never capped
    max_connections_per_user: int = 64
    #: a connection that sends no complete request for this long is closed (a request in
    #: progress, such as `launch --wait`'s long poll, is not idle)
    connection_idle_seconds: float = 5.0
    #: descriptors kept for the daemon's own work and for root: users' connections together
    #: hold at most the descriptor limit (RLIMIT_NOFILE, raised to its hard limit at start) less this
    reserved_descriptors: int = 512

    def validate(self) -> None:
        for key in ("socket_path", "manifest_dir"):
            value = getattr(self, key)
            if value and not value.startswith("/"):
                raise ValueError(f"{key}: must be an absolute path, got {value!r}")
        if not 0.05 <= self.manifest_poll_seconds <= 3600:
            raise ValueError(f"manifest_poll_seconds: must be in [0.05, 3600], got {self.manifest_poll_seconds}")
        for key in ("max_pods_per_user", "max_log_bytes_per_user", "ended_pods_per_user", "ended_pods_total",
                    "ended_pods_max_age_s", "ended_pods_log_bytes"):
            value = getattr(self, key)
            if isinstance(value, bool) or value < 0:
                raise ValueError(f"{key}: must be 0 (no limit) or more, got {value!r}")
        if not 1 <= self.max_connections_per_user <= 65536:
            raise ValueError(f"max_connections_per_user: must be in [1, 65536], got {self.max_connections_per_user}")
        if not 0.1 <= self.connection_idle_seconds <= 3600:
            raise ValueError(f"connection_idle_seconds: must be in [0.1, 3600], got {self.connection_idle_seconds}")
        if not 64 <= self.reserved_descriptors <= 1 << 20:
            raise ValueError(f"reserved_descriptors: must be in [64, 1048576], got {self.reserved_descriptors}")


#: ``config[WORKLOADS_SECTION]``, the [workloads] section
WORKLOADS_SECTION: SectionKey[WorkloadsConfig] = SectionKey("workloads", WorkloadsConfig)
