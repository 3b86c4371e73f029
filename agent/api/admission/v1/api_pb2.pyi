from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AdmitRequest(_message.Message):
    __slots__ = ("manifest", "dry_run", "ignore_unknown_fields")
    MANIFEST_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    IGNORE_UNKNOWN_FIELDS_FIELD_NUMBER: _ClassVar[int]
    manifest: bytes
    dry_run: bool
    ignore_unknown_fields: bool
    def __init__(self, manifest: _Optional[bytes] = ..., dry_run: _Optional[bool] = ..., ignore_unknown_fields: _Optional[bool] = ...) -> None: ...

class ContainerDecision(_message.Message):
    __slots__ = ("name", "numa_nodes", "any_node", "preferred", "admit", "reason", "cpu_ids", "mems", "devices")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUMA_NODES_FIELD_NUMBER: _ClassVar[int]
    ANY_NODE_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_FIELD_NUMBER: _ClassVar[int]
    ADMIT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CPU_IDS_FIELD_NUMBER: _ClassVar[int]
    MEMS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    name: str
    numa_nodes: _containers.RepeatedScalarFieldContainer[int]
    any_node: bool
    preferred: bool
    admit: bool
    reason: str
    cpu_ids: _containers.RepeatedScalarFieldContainer[int]
    mems: _containers.RepeatedScalarFieldContainer[int]
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    def __init__(self, name: _Optional[str] = ..., numa_nodes: _Optional[_Iterable[int]] = ..., any_node: _Optional[bool] = ..., preferred: _Optional[bool] = ..., admit: _Optional[bool] = ..., reason: _Optional[str] = ..., cpu_ids: _Optional[_Iterable[int]] = ..., mems: _Optional[_Iterable[int]] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ...) -> None: ...

class AdmitResponse(_message.Message):
    __slots__ = ("pod", "warnings", "dry_run", "would_admit", "reason", "decisions", "free")
    POD_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    WOULD_ADMIT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    FREE_FIELD_NUMBER: _ClassVar[int]
    pod: Pod
    warnings: _containers.RepeatedScalarFieldContainer[str]
    dry_run: bool
    would_admit: bool
    reason: str
    decisions: _containers.RepeatedCompositeFieldContainer[ContainerDecision]
    free: str
    def __init__(self, pod: _Optional[_Union[Pod, _Mapping]] = ..., warnings: _Optional[_Iterable[str]] = ..., dry_run: _Optional[bool] = ..., would_admit: _Optional[bool] = ..., reason: _Optional[str] = ..., decisions: _Optional[_Iterable[_Union[ContainerDecision, _Mapping]]] = ..., free: _Optional[str] = ...) -> None: ...

class PodRef(_message.Message):
    __slots__ = ("name", "namespace")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    name: str
    namespace: str
    def __init__(self, name: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class RemoveRequest(_message.Message):
    __slots__ = ("pod",)
    POD_FIELD_NUMBER: _ClassVar[int]
    pod: PodRef
    def __init__(self, pod: _Optional[_Union[PodRef, _Mapping]] = ...) -> None: ...

class RemoveResponse(_message.Message):
    __slots__ = ("pod",)
    POD_FIELD_NUMBER: _ClassVar[int]
    pod: Pod
    def __init__(self, pod: _Optional[_Union[Pod, _Mapping]] = ...) -> None: ...

class StopRequest(_message.Message):
    __slots__ = ("pod", "grace_seconds")
    POD_FIELD_NUMBER: _ClassVar[int]
    GRACE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    pod: PodRef
    grace_seconds: float
    def __init__(self, pod: _Optional[_Union[PodRef, _Mapping]] = ..., grace_seconds: _Optional[float] = ...) -> None: ...

class StopResponse(_message.Message):
    __slots__ = ("pod",)
    POD_FIELD_NUMBER: _ClassVar[int]
    pod: Pod
    def __init__(self, pod: _Optional[_Union[Pod, _Mapping]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("limit", "page_token", "summary")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    limit: int
    page_token: str
    summary: bool
    def __init__(self, limit: _Optional[int] = ..., page_token: _Optional[str] = ..., summary: _Optional[bool] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("pods", "manifest_errors", "next_page_token")
    PODS_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_ERRORS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    pods: _containers.RepeatedCompositeFieldContainer[Pod]
    manifest_errors: _containers.RepeatedCompositeFieldContainer[ManifestFileError]
    next_page_token: str
    def __init__(self, pods: _Optional[_Iterable[_Union[Pod, _Mapping]]] = ..., manifest_errors: _Optional[_Iterable[_Union[ManifestFileError, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("pod", "wait_terminal_seconds", "summary")
    POD_FIELD_NUMBER: _ClassVar[int]
    WAIT_TERMINAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    pod: PodRef
    wait_terminal_seconds: float
    summary: bool
    def __init__(self, pod: _Optional[_Union[PodRef, _Mapping]] = ..., wait_terminal_seconds: _Optional[float] = ..., summary: _Optional[bool] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("pod",)
    POD_FIELD_NUMBER: _ClassVar[int]
    pod: Pod
    def __init__(self, pod: _Optional[_Union[Pod, _Mapping]] = ...) -> None: ...

class SignalRequest(_message.Message):
    __slots__ = ("pod", "signal", "container")
    POD_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    pod: PodRef
    signal: str
    container: str
    def __init__(self, pod: _Optional[_Union[PodRef, _Mapping]] = ..., signal: _Optional[str] = ..., container: _Optional[str] = ...) -> None: ...

class SignalResponse(_message.Message):
    __slots__ = ("pod", "signal", "containers")
    POD_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    pod: Pod
    signal: str
    containers: _containers.RepeatedCompositeFieldContainer[SignalledContainer]
    def __init__(self, pod: _Optional[_Union[Pod, _Mapping]] = ..., signal: _Optional[str] = ..., containers: _Optional[_Iterable[_Union[SignalledContainer, _Mapping]]] = ...) -> None: ...

class SignalledContainer(_message.Message):
    __slots__ = ("name", "pids")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    pids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., pids: _Optional[_Iterable[int]] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("initial", "summary")
    INITIAL_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    initial: bool
    summary: bool
    def __init__(self, initial: _Optional[bool] = ..., summary: _Optional[bool] = ...) -> None: ...

class WatchEvent(_message.Message):
    __slots__ = ("type", "pod", "time")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    POD_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    type: str
    pod: Pod
    time: float
    def __init__(self, type: _Optional[str] = ..., pod: _Optional[_Union[Pod, _Mapping]] = ..., time: _Optional[float] = ...) -> None: ...

class ManifestFileError(_message.Message):
    __slots__ = ("path", "error")
    PATH_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    path: str
    error: str
    def __init__(self, path: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ("resource", "id", "numa_nodes")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NUMA_NODES_FIELD_NUMBER: _ClassVar[int]
    resource: str
    id: str
    numa_nodes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, resource: _Optional[str] = ..., id: _Optional[str] = ..., numa_nodes: _Optional[_Iterable[int]] = ...) -> None: ...

class MemoryBlock(_message.Message):
    __slots__ = ("resource", "size", "numa_nodes", "per_node")
    class PerNodeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    NUMA_NODES_FIELD_NUMBER: _ClassVar[int]
    PER_NODE_FIELD_NUMBER: _ClassVar[int]
    resource: str
    size: int
    numa_nodes: _containers.RepeatedScalarFieldContainer[int]
    per_node: _containers.ScalarMap[int, int]
    def __init__(self, resource: _Optional[str] = ..., size: _Optional[int] = ..., numa_nodes: _Optional[_Iterable[int]] = ..., per_node: _Optional[_Mapping[int, int]] = ...) -> None: ...

class Container(_message.Message):
    __slots__ = ("name", "kind", "cpu_ids", "mems", "numa_affinity", "any_node", "devices", "state", "reason", "restart_count", "pid", "exit_code", "cgroup", "pids", "memory")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CPU_IDS_FIELD_NUMBER: _ClassVar[int]
    MEMS_FIELD_NUMBER: _ClassVar[int]
    NUMA_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    ANY_NODE_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RESTART_COUNT_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    CGROUP_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    cpu_ids: _containers.RepeatedScalarFieldContainer[int]
    mems: _containers.RepeatedScalarFieldContainer[int]
    numa_affinity: _containers.RepeatedScalarFieldContainer[int]
    any_node: bool
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    state: str
    reason: str
    restart_count: int
    pid: int
    exit_code: int
    cgroup: str
    pids: _containers.RepeatedScalarFieldContainer[int]
    memory: _containers.RepeatedCompositeFieldContainer[MemoryBlock]
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., cpu_ids: _Optional[_Iterable[int]] = ..., mems: _Optional[_Iterable[int]] = ..., numa_affinity: _Optional[_Iterable[int]] = ..., any_node: _Optional[bool] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., state: _Optional[str] = ..., reason: _Optional[str] = ..., restart_count: _Optional[int] = ..., pid: _Optional[int] = ..., exit_code: _Optional[int] = ..., cgroup: _Optional[str] = ..., pids: _Optional[_Iterable[int]] = ..., memory: _Optional[_Iterable[_Union[MemoryBlock, _Mapping]]] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("time", "message")
    TIME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    time: float
    message: str
    def __init__(self, time: _Optional[float] = ..., message: _Optional[str] = ...) -> None: ...

class Pod(_message.Message):
    __slots__ = ("name", "namespace", "uid", "qos", "phase", "reason", "message", "source", "admitted_at", "released", "containers", "events", "record_json", "cgroup", "cgroup_dirs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    QOS_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    ADMITTED_AT_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    RECORD_JSON_FIELD_NUMBER: _ClassVar[int]
    CGROUP_FIELD_NUMBER: _ClassVar[int]
    CGROUP_DIRS_FIELD_NUMBER: _ClassVar[int]
    name: str
    namespace: str
    uid: str
    qos: str
    phase: str
    reason: str
    message: str
    source: str
    admitted_at: float
    released: bool
    containers: _containers.RepeatedCompositeFieldContainer[Container]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    record_json: str
    cgroup: str
    cgroup_dirs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., namespace: _Optional[str] = ..., uid: _Optional[str] = ..., qos: _Optional[str] = ..., phase: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., source: _Optional[str] = ..., admitted_at: _Optional[float] = ..., released: _Optional[bool] = ..., containers: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., record_json: _Optional[str] = ..., cgroup: _Optional[str] = ..., cgroup_dirs: _Optional[_Iterable[str]] = ...) -> None: ...
