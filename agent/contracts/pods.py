"""The workload data model shared by admission, the registry and the runtime.

A workload is a pod: the subset of a Kubernetes Pod that a bare-metal node
needs to decide resources and run processes. Admission turns a ``PodSpec`` into
an ``AdmittedPod`` (the spec plus, per container, what it was given); the
runtime runs an ``AdmittedPod`` and reports ``PodStatus`` changes back. All of
it is plain frozen data, so decisions stay pure functions and the registry can
persist it as JSON without knowing any component.

Quantities are parsed once, at the edge (the manifest reader), into integers:
milli-CPUs and bytes. Nothing downstream parses a Kubernetes quantity again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from agent.cpuset import CPUSet

#: the PATH a workload gets unless its env sets one: admission looks its command up along it
#: (agent.workloads.runnable), the runtime gives it to the process (agent.runtime.plan's BASE_ENV)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

__all__ = [
    "DEFAULT_PATH",
    "APP",
    "INIT",
    "CONTAINER_KINDS",
    "RESTART_POLICIES",
    "QOS_SHARED",
    "QOS_DEDICATED",
    "QOS_RECLAIMED",
    "QOS_SYSTEM",
    "EnvVar",
    "Resources",
    "RunAs",
    "RLimit",
    "ContainerSpec",
    "PodSpec",
    "Mount",
    "DeviceNode",
    "DeviceGrant",
    "ContainerAssignment",
    "AdmittedPod",
    "PodPhase",
    "ContainerState",
    "ContainerStatus",
    "PodStatus",
]

#: container kinds, in the order the runtime runs them
INIT = "init"
APP = "app"
CONTAINER_KINDS = (INIT, APP)

RESTART_POLICIES = ("Always", "OnFailure", "Never")

#: short QoS names used by the CLI and ``hwagent ps``; the CPU policy's own names
#: are the Katalyst annotation values (``shared_cores`` ...), see agent.cpu.qos
QOS_SHARED = "shared"
QOS_DEDICATED = "dedicated"
QOS_RECLAIMED = "reclaimed"
QOS_SYSTEM = "system"


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str


@dataclass(frozen=True)
class Resources:
    """A container's requests and limits, parsed.

    ``None`` means "not set". Extended resources (devices) are integers, and the
    API server's rule holds: a request equals its limit, so one number suffices.
    """

    cpu_request_milli: int | None = None
    cpu_limit_milli: int | None = None
    memory_request_bytes: int | None = None
    memory_limit_bytes: int | None = None
    #: extended resource name (e.g. "hwagent.io/loop") -> count
    extended: Mapping[str, int] = field(default_factory=dict)
    #: hugepage resource ("hugepages-2Mi", "hugepages-1Gi") -> bytes; request equals limit
    #: (the API server's rule), so one number suffices
    hugepages: Mapping[str, int] = field(default_factory=dict)
    #: resources.claims: the pod's claims (``PodSpec.resource_claims`` names) this container uses
    claims: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunAs:
    """The user a pod's processes run as (``spec.securityContext``).

    As the manifest asks it, any field may be None (``runAsGroup`` left to the
    user's primary group); as admission resolved it (``PodSpec.run_as`` of an
    admitted pod) ``uid`` and ``gid`` are set and ``groups`` are the supplementary
    groups the processes get. A pod without one runs as root, as before users."""

    uid: int | None = None
    gid: int | None = None
    groups: tuple[int, ...] = ()


@dataclass(frozen=True)
class RLimit:
    """One resource limit a pod's processes start with (``setrlimit``): ``resource`` by
    prlimit(1)'s name (``nofile``, ``nproc``, ...), soft and hard values, ``None`` for unlimited.
    Admission records the submitting process's own (``PodSpec.rlimits``, agent.runtime.rlimits)."""

    resource: str
    soft: int | None
    hard: int | None


@dataclass(frozen=True)
class ContainerSpec:
    name: str
    #: argv[0..]: ``command`` + ``args`` as the manifest gave them (no image, so no entrypoint)
    command: tuple[str, ...]
    args: tuple[str, ...] = ()
    env: tuple[EnvVar, ...] = ()
    working_dir: str | None = None
    resources: Resources = field(default_factory=Resources)
    kind: str = APP

    @property
    def argv(self) -> tuple[str, ...]:
        return self.command + self.args


@dataclass(frozen=True)
class PodSpec:
    name: str
    namespace: str
    uid: str
    containers: tuple[ContainerSpec, ...]
    init_containers: tuple[ContainerSpec, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    restart_policy: str = "Always"
    termination_grace_period_s: int = 30
    #: where the pod came from: "api" (Admit over the socket / CLI) or "file:<path>" (static manifest)
    source: str = "api"
    #: static manifests: sha256 of the file's bytes when it was admitted ("" for "api"),
    #: so a restart or a poll can tell an unchanged file from an edited one
    source_digest: str = ""
    #: who the processes run as (None: root); admission resolves it against the caller
    run_as: RunAs | None = None
    #: spec.resourceClaims: pod claim name -> the ResourceClaim (in the pod's namespace) it names
    resource_claims: Mapping[str, str] = field(default_factory=dict)
    #: the resource limits its processes start with: the submitting process's, read at admission
    #: (agent.runtime.rlimits); () when there was none (static manifests, in-process, records from before):
    #: then the system's defaults, PID 1's, at each start. Never taken from a manifest.
    rlimits: tuple[RLimit, ...] = ()

    @property
    def owner_uid(self) -> int:
        """The user the pod belongs to: the one it runs as (root without ``run_as``).
        A non-root caller sees, stops, removes and reads the logs of its own pods only."""
        return self.run_as.uid if self.run_as is not None and self.run_as.uid is not None else 0

    @property
    def key(self) -> str:
        """``namespace/name``: unique among admitted pods, what the CLI takes."""
        return f"{self.namespace}/{self.name}"

    def all_containers(self) -> tuple[ContainerSpec, ...]:
        """Init containers first, in order, then app containers: the order they are admitted and run."""
        return self.init_containers + self.containers


# --- what admission decided, per container -----------------------------------------------


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool = False


@dataclass(frozen=True)
class DeviceNode:
    container_path: str
    host_path: str
    #: cgroup device permissions, a subset of "rwm"
    permissions: str = "rw"


@dataclass(frozen=True)
class DeviceGrant:
    """Everything the device plugins' ContainerAllocateResponses said, merged
    (first one wins on collisions, as the kubelet does)."""

    envs: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    devices: tuple[DeviceNode, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    cdi_devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContainerAssignment:
    name: str
    #: cpuset.cpus at admission time. For dedicated containers it is theirs; for
    #: shared/reclaimed ones it is the pool's current set, which the CPU policy
    #: keeps current afterwards through the cgroup bound with ``bind_cgroup``.
    cpus: CPUSet
    #: cpuset.mems: the NUMA nodes of a NUMA-bound container, None = every allowed node
    mems: CPUSet | None = None
    #: the topology manager's merged affinity for this container (None = no preference)
    numa_affinity: frozenset[int] | None = None
    #: resource -> device ids the device manager gave this container
    devices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    grant: DeviceGrant = field(default_factory=DeviceGrant)


@dataclass(frozen=True)
class AdmittedPod:
    spec: PodSpec
    #: one of QOS_SHARED, QOS_DEDICATED, QOS_RECLAIMED, QOS_SYSTEM
    qos: str
    #: container name -> assignment, for every container of ``spec.all_containers()``
    assignments: Mapping[str, ContainerAssignment]
    admitted_at: float

    @property
    def uid(self) -> str:
        return self.spec.uid


# --- what the runtime reports ------------------------------------------------------------


class PodPhase(str, Enum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def terminal(self) -> bool:
        return self in (PodPhase.SUCCEEDED, PodPhase.FAILED)


class ContainerState(str, Enum):
    WAITING = "waiting"
    RUNNING = "running"
    TERMINATED = "terminated"


@dataclass(frozen=True)
class ContainerStatus:
    name: str
    state: ContainerState = ContainerState.WAITING
    #: e.g. "ContainerCreating", "CrashLoopBackOff", "Completed", "Error", "Evicted", "StartError"
    reason: str = ""
    message: str = ""
    pid: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    restart_count: int = 0


@dataclass(frozen=True)
class PodStatus:
    phase: PodPhase = PodPhase.PENDING
    #: e.g. "Evicted", "StartError", "Stopped"
    reason: str = ""
    message: str = ""
    containers: tuple[ContainerStatus, ...] = ()
    started_at: float | None = None
    finished_at: float | None = None
