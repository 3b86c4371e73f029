from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ComponentStatus(_message.Message):
    __slots__ = ("name", "healthy", "ready", "detail")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    name: str
    healthy: bool
    ready: bool
    detail: str
    def __init__(self, name: _Optional[str] = ..., healthy: _Optional[bool] = ..., ready: _Optional[bool] = ..., detail: _Optional[str] = ...) -> None: ...

class ProbeStatus(_message.Message):
    __slots__ = ("name", "mode", "detail")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    name: str
    mode: str
    detail: str
    def __init__(self, name: _Optional[str] = ..., mode: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class ResourceStatus(_message.Message):
    __slots__ = ("name", "capacity", "allocatable", "allocated", "source")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    ALLOCATABLE_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    name: str
    capacity: int
    allocatable: int
    allocated: int
    source: str
    def __init__(self, name: _Optional[str] = ..., capacity: _Optional[int] = ..., allocatable: _Optional[int] = ..., allocated: _Optional[int] = ..., source: _Optional[str] = ...) -> None: ...

class PodStatus(_message.Message):
    __slots__ = ("namespace", "name", "uid", "qos", "containers", "devices")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    QOS_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    uid: str
    qos: str
    containers: _containers.RepeatedScalarFieldContainer[str]
    devices: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ..., qos: _Optional[str] = ..., containers: _Optional[_Iterable[str]] = ..., devices: _Optional[_Iterable[str]] = ...) -> None: ...

class EvictionStatus(_message.Message):
    __slots__ = ("namespace", "pod", "pod_uid", "reason", "signal", "action", "wall_time", "evidence_json")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    POD_FIELD_NUMBER: _ClassVar[int]
    POD_UID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    WALL_TIME_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_JSON_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    pod: str
    pod_uid: str
    reason: str
    signal: str
    action: str
    wall_time: float
    evidence_json: str
    def __init__(self, namespace: _Optional[str] = ..., pod: _Optional[str] = ..., pod_uid: _Optional[str] = ..., reason: _Optional[str] = ..., signal: _Optional[str] = ..., action: _Optional[str] = ..., wall_time: _Optional[float] = ..., evidence_json: _Optional[str] = ...) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("mode", "mode_reason", "phase", "pid", "uptime_seconds", "components", "probes", "resources", "pods", "pods_source", "evictions", "metrics_url")
    MODE_FIELD_NUMBER: _ClassVar[int]
    MODE_REASON_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    PROBES_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    PODS_FIELD_NUMBER: _ClassVar[int]
    PODS_SOURCE_FIELD_NUMBER: _ClassVar[int]
    EVICTIONS_FIELD_NUMBER: _ClassVar[int]
    METRICS_URL_FIELD_NUMBER: _ClassVar[int]
    mode: str
    mode_reason: str
    phase: str
    pid: int
    uptime_seconds: float
    components: _containers.RepeatedCompositeFieldContainer[ComponentStatus]
    probes: _containers.RepeatedCompositeFieldContainer[ProbeStatus]
    resources: _containers.RepeatedCompositeFieldContainer[ResourceStatus]
    pods: _containers.RepeatedCompositeFieldContainer[PodStatus]
    pods_source: str
    evictions: _containers.RepeatedCompositeFieldContainer[EvictionStatus]
    metrics_url: str
    def __init__(self, mode: _Optional[str] = ..., mode_reason: _Optional[str] = ..., phase: _Optional[str] = ..., pid: _Optional[int] = ..., uptime_seconds: _Optional[float] = ..., components: _Optional[_Iterable[_Union[ComponentStatus, _Mapping]]] = ..., probes: _Optional[_Iterable[_Union[ProbeStatus, _Mapping]]] = ..., resources: _Optional[_Iterable[_Union[ResourceStatus, _Mapping]]] = ..., pods: _Optional[_Iterable[_Union[PodStatus, _Mapping]]] = ..., pods_source: _Optional[str] = ..., evictions: _Optional[_Iterable[_Union[EvictionStatus, _Mapping]]] = ..., metrics_url: _Optional[str] = ...) -> None: ...

class GetViewRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetViewResponse(_message.Message):
    __slots__ = ("json_document",)
    JSON_DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    json_document: str
    def __init__(self, json_document: _Optional[str] = ...) -> None: ...
