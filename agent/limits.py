"""Size limits on everything that enters hwagent from outside, and their validators.

Every string a caller hands us (pod UIDs, names, container names, resource
names, device ids, annotations) ends up in memory, in checkpoints and in the
answers other clients read back. Unbounded, two 3 MB names made a 12 MB
checkpoint that a default 4 MB gRPC client could no longer read. The bounds are
Kubernetes' own, so nothing a real kubelet or API server sends is refused:

- object names (pod): a DNS subdomain, at most 253 bytes;
- namespaces and container names: a DNS label, at most 63 bytes;
- UIDs: 36 bytes (the length of the UUID the API server assigns);
- resource names, label and annotation keys: a qualified name, an optional
  DNS-subdomain prefix (253) plus ``/`` plus a name of at most 63 bytes;
- label values: 63 bytes; all annotations of an object together: 256 KiB
  (``len(key) + len(value)`` summed, as the API server's ValidateAnnotationsSize).

Device ids have no upstream bound; 253 bytes holds every id the known plugins
use (UUIDs, PCI addresses, ``MIG-<uuid>``) with room to spare.

Only lengths are checked here, not character sets: the entry points that know
a stricter rule (extended resource names, socket file names) apply it after the
bound, so their messages never echo a megabyte of input. The validators are pure
and raise :class:`LimitError` (a ``ValueError``) with a message that names the
field, its size and the limit.

The gRPC message limits per API sit here too, so one file answers "how big may
anything be".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "ANNOTATIONS_TOTAL_MAX",
    "GRPC_MESSAGE_LIMITS",
    "MAX_MANIFEST_BYTES",
    "MAX_BYTES",
    "LimitError",
    "MessageLimits",
    "check_annotations",
    "check_device_ids",
    "check_labels",
    "check_name",
    "check_qualified_name",
    "shown",
]

DNS_SUBDOMAIN_MAX = 253
DNS_LABEL_MAX = 63
UID_MAX = 36
#: one Pod manifest (admission, and the CLI API's request body); the API server takes
#: requests up to 3 MiB, and one pod for one node needs far less
MAX_MANIFEST_BYTES = 1 << 20
QUALIFIED_NAME_MAX = DNS_SUBDOMAIN_MAX + 1 + DNS_LABEL_MAX
LABEL_VALUE_MAX = 63
ANNOTATIONS_TOTAL_MAX = 256 * 1024

#: kind -> the most UTF-8 bytes a value of that kind may have
MAX_BYTES: Mapping[str, int] = {
    "pod_uid": UID_MAX,
    "pod_name": DNS_SUBDOMAIN_MAX,
    "pod_namespace": DNS_LABEL_MAX,
    "container_name": DNS_LABEL_MAX,
    "resource_name": QUALIFIED_NAME_MAX,
    "device_id": DNS_SUBDOMAIN_MAX,
    # Katalyst's free-form pod descriptors and the QoS class name
    "pod_role": DNS_SUBDOMAIN_MAX,
    "pod_type": DNS_SUBDOMAIN_MAX,
    "native_qos_class": DNS_LABEL_MAX,
    # a socket file name in the device-plugins dir (NAME_MAX)
    "endpoint": 255,
    # an API version string such as "v1beta1"
    "version": DNS_LABEL_MAX,
    "label_value": LABEL_VALUE_MAX,
    # a cgroup path handed over by a runtime (PATH_MAX)
    "cgroup_path": 4096,
    # free text a peer sends us to log (a registration error, say)
    "message": 4096,
}

_WHAT = {
    "pod_uid": "a UID",
    "pod_name": "an object name (DNS subdomain)",
    "pod_namespace": "a namespace (DNS label)",
    "container_name": "a container name (DNS label)",
    "resource_name": "a qualified name",
    "label_value": "a label value",
}


class LimitError(ValueError):
    """A value over its bound. ``kind`` names the field, for metrics and callers."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def shown(value: str, limit: int = 64) -> str:
    """``repr(value)`` cut to about ``limit`` characters, for error messages and logs:
    an error must not carry the oversized input back to the caller."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value.encode('utf-8', 'surrogatepass'))} bytes)"


def _size(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def check_name(kind: str, value: str) -> str:
    """``value`` if it fits the bound of ``kind`` (a key of :data:`MAX_BYTES`)."""
    limit = MAX_BYTES[kind]
    n = _size(value)
    if n > limit:
        what = _WHAT.get(kind)
        rule = f" (Kubernetes' limit for {what})" if what else ""
        start = repr(value[:32]) + ("..." if len(value) > 32 else "")
        raise LimitError(kind, f"{kind} {start} is {n} bytes; the limit is {limit}{rule}")
    return value


def check_qualified_name(kind: str, value: str) -> str:
    """A qualified name's parts: optional prefix <= 253 bytes, name <= 63 bytes."""
    prefix, sep, name = value.rpartition("/")
    if _size(name) > DNS_LABEL_MAX or (sep and _size(prefix) > DNS_SUBDOMAIN_MAX):
        raise LimitError(
            kind,
            f"{kind} {shown(value, 32)} is too long: a qualified name has a prefix of at most "
            f"{DNS_SUBDOMAIN_MAX} bytes and a name of at most {DNS_LABEL_MAX}",
        )
    return value


def check_annotations(annotations: Mapping[str, str], kind: str = "annotations") -> None:
    """Every key a bounded qualified name, all keys and values together <= 256 KiB."""
    total = 0
    for key, value in annotations.items():
        check_qualified_name(f"{kind} key", key)
        total += _size(key) + _size(value)
        if total > ANNOTATIONS_TOTAL_MAX:
            break
    if total > ANNOTATIONS_TOTAL_MAX:
        raise LimitError(
            kind, f"{kind} are more than {ANNOTATIONS_TOTAL_MAX} bytes in total (Kubernetes' limit is 256 KiB)"
        )


def check_labels(labels: Mapping[str, str], kind: str = "labels") -> None:
    """Keys are bounded qualified names, values at most 63 bytes."""
    for key, value in labels.items():
        check_qualified_name(f"{kind} key", key)
        if _size(value) > LABEL_VALUE_MAX:
            raise LimitError(
                kind, f"{kind} value of {shown(key, 32)} is {_size(value)} bytes; the limit is {LABEL_VALUE_MAX}"
            )


def check_device_ids(ids: Iterable[str]) -> None:
    for i in ids:
        check_name("device_id", i)


@dataclass(frozen=True)
class MessageLimits:
    """Per gRPC server: the largest request it decodes and the largest answer it sends."""

    receive: int
    send: int

    def options(self) -> list[tuple[str, int]]:
        return [("grpc.max_receive_message_length", self.receive), ("grpc.max_send_message_length", self.send)]


KiB = 1024
MiB = 1024 * KiB

#: sized per API. Requests: a RegisterRequest or a pod-resources Get is a few
#: names; an AllocateRequest lists device ids; a ResourceRequest carries a pod's
#: annotations (256 KiB) and labels. Answers that list the whole node
#: (pod-resources List, GetResourcesAllocation) get the kubelet's pod-resources
#: bound of 16 MiB; the rest the 4 MiB every default gRPC client accepts. hwagent's
#: own clients dial with the same numbers mirrored (agent.unixsock.dial).
GRPC_MESSAGE_LIMITS: Mapping[str, MessageLimits] = {
    "registration": MessageLimits(receive=64 * KiB, send=64 * KiB),
    "deviceplugin": MessageLimits(receive=1 * MiB, send=4 * MiB),
    "podresources": MessageLimits(receive=64 * KiB, send=16 * MiB),
    "resourceplugin": MessageLimits(receive=1 * MiB, send=16 * MiB),
    # hwagent's admission API: a manifest of up to 1 MiB in; List answers every pod with its
    # record (about 2 KB each: 10,000 pods are about 19 MB), which `hwagent ps` receives
    "admission": MessageLimits(receive=2 * MiB, send=64 * MiB),
    # Katalyst's eviction manager sends every active pod, whole (spec and status included)
    "evictionplugin": MessageLimits(receive=32 * MiB, send=16 * MiB),
    # hwagent's status API: empty requests; answers name every pod
    "status": MessageLimits(receive=64 * KiB, send=16 * MiB),
    # the plugin watcher's GetInfo: a PluginInfo is a few names (hwagent only dials it)
    "pluginregistration": MessageLimits(receive=64 * KiB, send=64 * KiB),
    # the kubelet's DRAPlugin and DRAResourceHealth: a pod's claims (a few names each) in; a device list out
    "dra": MessageLimits(receive=1 * MiB, send=4 * MiB),
}
