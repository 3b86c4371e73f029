from agent.api.k8s.core.v1 import api_pb2 as _api_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ThresholdMetType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NOT_MET: _ClassVar[ThresholdMetType]
    SOFT_MET: _ClassVar[ThresholdMetType]
    HARD_MET: _ClassVar[ThresholdMetType]

class ThresholdOperator(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LESS_THAN: _ClassVar[ThresholdOperator]
    GREATER_THAN: _ClassVar[ThresholdOperator]

class ConditionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_CONDITION: _ClassVar[ConditionType]
    CNR_CONDITION: _ClassVar[ConditionType]
NOT_MET: ThresholdMetType
SOFT_MET: ThresholdMetType
HARD_MET: ThresholdMetType
LESS_THAN: ThresholdOperator
GREATER_THAN: ThresholdOperator
NODE_CONDITION: ConditionType
CNR_CONDITION: ConditionType

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Condition(_message.Message):
    __slots__ = ("condition_type", "effects", "condition_name", "met_condition")
    CONDITION_TYPE_FIELD_NUMBER: _ClassVar[int]
    EFFECTS_FIELD_NUMBER: _ClassVar[int]
    CONDITION_NAME_FIELD_NUMBER: _ClassVar[int]
    MET_CONDITION_FIELD_NUMBER: _ClassVar[int]
    condition_type: ConditionType
    effects: _containers.RepeatedScalarFieldContainer[str]
    condition_name: str
    met_condition: bool
    def __init__(self, condition_type: _Optional[_Union[ConditionType, str]] = ..., effects: _Optional[_Iterable[str]] = ..., condition_name: _Optional[str] = ..., met_condition: _Optional[bool] = ...) -> None: ...

class GetThresholdMetRequest(_message.Message):
    __slots__ = ("active_pods",)
    ACTIVE_PODS_FIELD_NUMBER: _ClassVar[int]
    active_pods: _containers.RepeatedCompositeFieldContainer[_api_pb2.Pod]
    def __init__(self, active_pods: _Optional[_Iterable[_Union[_api_pb2.Pod, _Mapping]]] = ...) -> None: ...

class ThresholdMetResponse(_message.Message):
    __slots__ = ("threshold_value", "observed_value", "threshold_operator", "met_type", "eviction_scope", "grace_period_seconds", "condition", "candidate_pods")
    THRESHOLD_VALUE_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_VALUE_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_OPERATOR_FIELD_NUMBER: _ClassVar[int]
    MET_TYPE_FIELD_NUMBER: _ClassVar[int]
    EVICTION_SCOPE_FIELD_NUMBER: _ClassVar[int]
    GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_PODS_FIELD_NUMBER: _ClassVar[int]
    threshold_value: float
    observed_value: float
    threshold_operator: ThresholdOperator
    met_type: ThresholdMetType
    eviction_scope: str
    grace_period_seconds: int
    condition: Condition
    candidate_pods: _containers.RepeatedCompositeFieldContainer[_api_pb2.Pod]
    def __init__(self, threshold_value: _Optional[float] = ..., observed_value: _Optional[float] = ..., threshold_operator: _Optional[_Union[ThresholdOperator, str]] = ..., met_type: _Optional[_Union[ThresholdMetType, str]] = ..., eviction_scope: _Optional[str] = ..., grace_period_seconds: _Optional[int] = ..., condition: _Optional[_Union[Condition, _Mapping]] = ..., candidate_pods: _Optional[_Iterable[_Union[_api_pb2.Pod, _Mapping]]] = ...) -> None: ...

class GetTopEvictionPodsRequest(_message.Message):
    __slots__ = ("active_pods", "topN", "eviction_scope", "candidate_eviction_records")
    ACTIVE_PODS_FIELD_NUMBER: _ClassVar[int]
    TOPN_FIELD_NUMBER: _ClassVar[int]
    EVICTION_SCOPE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_EVICTION_RECORDS_FIELD_NUMBER: _ClassVar[int]
    active_pods: _containers.RepeatedCompositeFieldContainer[_api_pb2.Pod]
    topN: int
    eviction_scope: str
    candidate_eviction_records: _containers.RepeatedCompositeFieldContainer[EvictionRecord]
    def __init__(self, active_pods: _Optional[_Iterable[_Union[_api_pb2.Pod, _Mapping]]] = ..., topN: _Optional[int] = ..., eviction_scope: _Optional[str] = ..., candidate_eviction_records: _Optional[_Iterable[_Union[EvictionRecord, _Mapping]]] = ...) -> None: ...

class GetTopEvictionPodsResponse(_message.Message):
    __slots__ = ("target_pods", "deletion_options")
    TARGET_PODS_FIELD_NUMBER: _ClassVar[int]
    DELETION_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    target_pods: _containers.RepeatedCompositeFieldContainer[_api_pb2.Pod]
    deletion_options: DeletionOptions
    def __init__(self, target_pods: _Optional[_Iterable[_Union[_api_pb2.Pod, _Mapping]]] = ..., deletion_options: _Optional[_Union[DeletionOptions, _Mapping]] = ...) -> None: ...

class EvictPod(_message.Message):
    __slots__ = ("pod", "reason", "deletion_options", "force_evict", "eviction_plugin_name")
    POD_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DELETION_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    FORCE_EVICT_FIELD_NUMBER: _ClassVar[int]
    EVICTION_PLUGIN_NAME_FIELD_NUMBER: _ClassVar[int]
    pod: _api_pb2.Pod
    reason: str
    deletion_options: DeletionOptions
    force_evict: bool
    eviction_plugin_name: str
    def __init__(self, pod: _Optional[_Union[_api_pb2.Pod, _Mapping]] = ..., reason: _Optional[str] = ..., deletion_options: _Optional[_Union[DeletionOptions, _Mapping]] = ..., force_evict: _Optional[bool] = ..., eviction_plugin_name: _Optional[str] = ...) -> None: ...

class GetEvictPodsRequest(_message.Message):
    __slots__ = ("active_pods",)
    ACTIVE_PODS_FIELD_NUMBER: _ClassVar[int]
    active_pods: _containers.RepeatedCompositeFieldContainer[_api_pb2.Pod]
    def __init__(self, active_pods: _Optional[_Iterable[_Union[_api_pb2.Pod, _Mapping]]] = ...) -> None: ...

class GetEvictPodsResponse(_message.Message):
    __slots__ = ("evict_pods", "condition")
    EVICT_PODS_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    evict_pods: _containers.RepeatedCompositeFieldContainer[EvictPod]
    condition: Condition
    def __init__(self, evict_pods: _Optional[_Iterable[_Union[EvictPod, _Mapping]]] = ..., condition: _Optional[_Union[Condition, _Mapping]] = ...) -> None: ...

class GetTokenResponse(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    def __init__(self, token: _Optional[str] = ...) -> None: ...

class DeletionOptions(_message.Message):
    __slots__ = ("grace_period_seconds",)
    GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    grace_period_seconds: int
    def __init__(self, grace_period_seconds: _Optional[int] = ...) -> None: ...

class EvictionRecord(_message.Message):
    __slots__ = ("uid", "has_pdb", "buckets", "disruptions_allowed", "current_healthy", "desired_healthy", "expected_pods")
    UID_FIELD_NUMBER: _ClassVar[int]
    HAS_PDB_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    DISRUPTIONS_ALLOWED_FIELD_NUMBER: _ClassVar[int]
    CURRENT_HEALTHY_FIELD_NUMBER: _ClassVar[int]
    DESIRED_HEALTHY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_PODS_FIELD_NUMBER: _ClassVar[int]
    uid: str
    has_pdb: bool
    buckets: Buckets
    disruptions_allowed: int
    current_healthy: int
    desired_healthy: int
    expected_pods: int
    def __init__(self, uid: _Optional[str] = ..., has_pdb: _Optional[bool] = ..., buckets: _Optional[_Union[Buckets, _Mapping]] = ..., disruptions_allowed: _Optional[int] = ..., current_healthy: _Optional[int] = ..., desired_healthy: _Optional[int] = ..., expected_pods: _Optional[int] = ...) -> None: ...

class Buckets(_message.Message):
    __slots__ = ("list",)
    LIST_FIELD_NUMBER: _ClassVar[int]
    list: _containers.RepeatedCompositeFieldContainer[Bucket]
    def __init__(self, list: _Optional[_Iterable[_Union[Bucket, _Mapping]]] = ...) -> None: ...

class Bucket(_message.Message):
    __slots__ = ("time", "duration", "count")
    TIME_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    time: int
    duration: int
    count: int
    def __init__(self, time: _Optional[int] = ..., duration: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...
