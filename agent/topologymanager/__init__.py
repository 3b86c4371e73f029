"""The topology manager: align a pod's CPUs, devices (and later memory) on NUMA nodes.

The kubelet's ``pkg/kubelet/cm/topologymanager`` semantics (policies none,
best-effort, restricted, single-numa-node; scopes container and pod; options
prefer-closest-numa-nodes and max-allowable-numa-nodes), written for hwagent's
hint providers. See docs/topology-manager.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import DEFAULT_MAX_ALLOWABLE_NUMA_NODES, POLICIES, SCOPES, TopologyManagerConfig
    from .hints import Decision, ProviderHints, TopologyAffinityError, TopologyHint, format_affinity
    from .manager import ANY_HINT, HintProvider, TopologyManager
    from .metrics import ADMISSION_DURATION, ADMISSION_ERRORS, ADMISSION_REQUESTS

#: each public name -> the submodule that defines it. Imported on first use (PEP 562):
#: the config loader imports ``agent.topologymanager.config``, which runs this file, and
#: every CLI command loads the config; importing the manager here made each of them pay
#: for the contracts and prometheus_client (tests/unit/test_cli_imports.py).
_WHERE = {
    "DEFAULT_MAX_ALLOWABLE_NUMA_NODES": "config", "POLICIES": "config", "SCOPES": "config",
    "TopologyManagerConfig": "config",
    "Decision": "hints", "ProviderHints": "hints", "TopologyAffinityError": "hints", "TopologyHint": "hints",
    "format_affinity": "hints",
    "ANY_HINT": "manager", "HintProvider": "manager", "TopologyManager": "manager",
    "ADMISSION_DURATION": "metrics", "ADMISSION_ERRORS": "metrics", "ADMISSION_REQUESTS": "metrics",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


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
