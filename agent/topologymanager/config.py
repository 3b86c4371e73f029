"""The [topology_manager] config section: policy, scope and the two policy options.

The names and the limits are the kubelet's (``--topology-manager-policy``,
``--topology-manager-scope``, ``--topology-manager-policy-options``), spelled as
TOML keys, so a kubelet configuration translates one to one.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.config import SectionKey

__all__ = [
    "TOPOLOGY_MANAGER_SECTION",
    "POLICIES",
    "SCOPES",
    "DEFAULT_MAX_ALLOWABLE_NUMA_NODES",
    "TopologyManagerConfig",
]

#: the kubelet's policy names, in order of strictness
POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
SCOPES = ("container", "pod")
#: the kubelet's default, and also its minimum for max-allowable-numa-nodes
DEFAULT_MAX_ALLOWABLE_NUMA_NODES = 8


@dataclass(frozen=True)
class TopologyManagerConfig:
    #: none | best-effort | restricted | single-numa-node
    policy: str = "none"
    #: container (align each container on its own) | pod (one alignment for all)
    scope: str = "container"
    #: among equally narrow masks pick the one with the smallest average NUMA distance
    prefer_closest_numa_nodes: bool = False
    #: refuse to start with a policy other than none on a machine with more NUMA nodes
    max_allowable_numa_nodes: int = DEFAULT_MAX_ALLOWABLE_NUMA_NODES

    def validate(self) -> None:
        """Called by the config loader and by TopologyManager (not on construction,
        so the loader can report the error under the section's name)."""
        if self.policy not in POLICIES:
            raise ValueError(f"policy: must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if self.scope not in SCOPES:
            raise ValueError(f"scope: must be one of {', '.join(SCOPES)}, got {self.scope!r}")
        if isinstance(self.max_allowable_numa_nodes, bool) or not isinstance(self.max_allowable_numa_nodes, int):
            raise ValueError(f"max_allowable_numa_nodes: must be an integer, got {self.max_allowable_numa_nodes!r}")
        if self.max_allowable_numa_nodes < DEFAULT_MAX_ALLOWABLE_NUMA_NODES:
            # the kubelet refuses a value below its default: the limit exists to
            # bound the hint cross product, never to shrink the machine
            raise ValueError(
                f"max_allowable_numa_nodes: must be at least {DEFAULT_MAX_ALLOWABLE_NUMA_NODES}, "
                f"got {self.max_allowable_numa_nodes}"
            )


#: ``config[TOPOLOGY_MANAGER_SECTION]``, the [topology_manager] section
TOPOLOGY_MANAGER_SECTION: SectionKey[TopologyManagerConfig] = SectionKey("topology_manager", TopologyManagerConfig)
