"""The topology manager: align a pod's CPUs, devices (and later memory) on NUMA nodes.

The kubelet's ``pkg/kubelet/cm/topologymanager`` semantics (policies none,
best-effort, restricted, single-numa-node; scopes container and pod; options
prefer-closest-numa-nodes and max-allowable-numa-nodes), written for hwagent's
hint providers. See docs/topology-manager.md.
"""

from __future__ import annotations

from .config import DEFAULT_MAX_ALLOWABLE_NUMA_NODES, POLICIES, SCOPES, TopologyManagerConfig
from .hints import Decision, ProviderHints, TopologyAffinityError, TopologyHint, format_affinity
from .manager import ANY_HINT, HintProvider, TopologyManager
from .metrics import ADMISSION_DURATION, ADMISSION_ERRORS, ADMISSION_REQUESTS

__all__ = [
    "ADMISSION_DURATION",
    "ADMISSION_ERRORS",
    "ADMISSION_REQUESTS",
    "ANY_HINT",
    "DEFAULT_MAX_ALLOWABLE_NUMA_NODES",
    "Decision",
    "HintProvider",
    "POLICIES",
    "ProviderHints",
    "SCOPES",
    "TopologyAffinityError",
    "TopologyHint",
    "TopologyManager",
    "TopologyManagerConfig",
    "format_affinity",
]
