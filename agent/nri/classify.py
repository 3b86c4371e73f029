"""Which QoS level a container the runtime reports gets, and what it asks for (pure).

The runtime tells an NRI plugin a container's cgroup parent and its Linux
resources, not its Kubernetes QoS class or requests; the kubelet encoded both
there, and this module reads them back the way the kubelet wrote them:

- the QoS class from the pod's cgroup parent (the kubelet puts BestEffort pods
  under ``.../besteffort/...`` or ``kubepods-besteffort.slice``, Burstable under
  ``burstable``, Guaranteed directly under ``kubepods``), as containers/nri-plugins do;
- the CPU request from ``cpu.shares`` (the kubelet's MilliCPUToShares is
  ``milli * 1024 / 1000``, at least 2: so ``milli = shares * 1000 / 1024``, and 2
  shares, BestEffort's, is no request) and the limit from CFS quota / period;
- the memory limit and hugepage limits as they are.

Then the level, as the kubelet and Katalyst would: Katalyst's
``katalyst.kubewharf.io/qos_level`` annotation on the pod wins where present;
else Guaranteed with a whole number of CPUs -> ``dedicated_cores`` with
``numa_binding`` (the CPU policy's dedicated cores are NUMA-bound), Burstable or
a fraction of a CPU -> ``shared_cores``, BestEffort -> ``reclaimed_cores``. A pod
(or container) annotated ``hwagent.io/nri: ignore`` is left alone: no adjustment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.contracts.cpu import DEDICATED, RECLAIMED, SHARED
from agent.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_KEY

__all__ = [
    "BESTEFFORT", "BURSTABLE", "GUARANTEED", "OPT_OUT_KEY", "OPT_OUT_VALUE", "Classified", "Resources",
    "classify", "kube_qos_of", "milli_from_quota", "milli_from_shares",
]

#: the opt-out annotation (on the pod or the container): hwagent answers no adjustment
OPT_OUT_KEY = "hwagent.io/nri"
OPT_OUT_VALUE = "ignore"

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BESTEFFORT = "BestEffort"

#: the kubelet's minimum cpu.shares (MinShares): what a container without a CPU request gets
MIN_SHARES = 2

#: the memory enhancement a Guaranteed pod with whole CPUs is placed with
NUMA_BINDING = '{"numa_binding": "true"}'

#: the prefix of the annotations the CPU policy reads (QoS level, enhancements)
_KATALYST_PREFIX = "katalyst.kubewharf.io/"


@dataclass(frozen=True)
class Resources:
    """What the runtime's message says of a container's resources (None: not set)."""

    cpu_shares: int | None = None
    cpu_quota: int | None = None
    cpu_period: int | None = None
    memory_limit: int | None = None
    #: page size as the runtime names it ("2MB", "1GB") -> bytes
    hugepages: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Classified:
    #: the CPU policy's level (shared_cores, ...); "" = opted out, no adjustment
    level: str
    #: Guaranteed / Burstable / BestEffort, or "" when the level came from the annotation
    kube_qos: str
    cpu_request_milli: int
    cpu_limit_milli: int | None
    memory_limit_bytes: int | None
    #: "hugepages-2Mi" style names -> bytes (the names the memory manager places)
    hugepages: Mapping[str, int]
    #: the annotations the CPU policy is asked with (the level, and the pod's Katalyst ones)
    annotations: Mapping[str, str]
    #: one line for the log: why this level
    reason: str

    @property
    def ignored(self) -> bool:
        return not self.level


def milli_from_shares(shares: int | None) -> int:
    """The CPU request the kubelet turned into ``shares`` (0: none, BestEffort's 2 shares)."""
    if shares is None or shares <= MIN_SHARES:
        return 0
    return round(shares * 1000 / 1024)


def milli_from_quota(quota: int | None, period: int | None) -> int | None:
    """The CPU limit from CFS quota and period (None: no limit, quota -1 or unset)."""
    if quota is None or quota <= 0 or not period:
        return None
    return round(quota * 1000 / period)


def kube_qos_of(cgroup_parent: str) -> str:
    """The pod's Kubernetes QoS class from the cgroup parent the kubelet gave it."""
    p = cgroup_parent.lower()
    if "besteffort" in p:
        return BESTEFFORT
    if "burstable" in p:
        return BURSTABLE
    return GUARANTEED


def _page_name(size: str) -> str:
    """The runtime's page size ("2MB", "1GB", "64KB") as a hugepage resource ("hugepages-2Mi")."""
    s = size.strip().upper().removesuffix("B")
    units = {"K": "Ki", "M": "Mi", "G": "Gi"}
    if s and s[-1] in units and s[:-1].isdigit():
        return f"hugepages-{s[:-1]}{units[s[-1]]}"
    raise ValueError(f"unknown hugepage size {size!r}")


def classify(pod_annotations: Mapping[str, str], container_annotations: Mapping[str, str],
             cgroup_parent: str, res: Resources, *, allow_opt_out: bool = True) -> Classified:
    """The level and requests of one container. A bad Katalyst annotation is not judged
    here: the CPU policy refuses it with its own reason (counted, container unadjusted).
    ``allow_opt_out`` False: the opt-out annotation is not honoured (``[nri] honor_opt_out``)."""
    request = milli_from_shares(res.cpu_shares)
    limit = milli_from_quota(res.cpu_quota, res.cpu_period)
    pages = {_page_name(k): v for k, v in res.hugepages.items() if v}
    katalyst = {k: v for k, v in pod_annotations.items() if k.startswith(_KATALYST_PREFIX)}
    opted_out = allow_opt_out and \
        OPT_OUT_VALUE in (pod_annotations.get(OPT_OUT_KEY), container_annotations.get(OPT_OUT_KEY))

    def out(level: str, kube: str, reason: str) -> Classified:
        ann = {**katalyst, QOS_KEY: level} if level else {}
        if kube == GUARANTEED and level == DEDICATED:
            # the kubelet's static policy gives whole cores; the CPU policy's dedicated cores are
            # NUMA-bound (its memory on the same node: the memory manager places it)
            ann[MEMORY_ENHANCEMENT_KEY] = NUMA_BINDING
        return Classified(level, kube, request, limit, res.memory_limit, pages, ann, reason)

    if opted_out:
        return out("", "", f"annotation {OPT_OUT_KEY}: {OPT_OUT_VALUE}")
    if QOS_KEY in pod_annotations:
        return out(pod_annotations[QOS_KEY], "", f"annotation {QOS_KEY}")
    kube = kube_qos_of(cgroup_parent)
    if kube == BESTEFFORT:
        return out(RECLAIMED, kube, "BestEffort pod")
    if kube == GUARANTEED and request > 0 and request % 1000 == 0:
        return out(DEDICATED, kube, f"Guaranteed pod, {request // 1000} whole CPUs")
    if kube == GUARANTEED:
        return out(SHARED, kube, f"Guaranteed pod, {request}m CPU (not whole CPUs)")
    return out(SHARED, kube, "Burstable pod")
