"""Pod manifests (YAML or JSON) -> ``PodSpec``, validated as the API server would.

The accepted document is the subset of a Kubernetes Pod a bare-metal node can
honour (docs/admission.md). Everything else is refused with the path of the
offending field (``spec.containers[0].resources.limits.cpu``), because a field
that is silently dropped changes what the user gets; ``ignore_unknown=True``
turns unknown fields into warnings instead, for manifests written for a cluster.

Hostile input is bounded before it is parsed: the document size, YAML aliases
(refused outright: they are how a small file expands into a huge tree),
duplicate keys, nesting depth, and every list and string the spec keeps.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


from agent.limits import MAX_MANIFEST_BYTES, UID_MAX
from agent.contracts.pods import APP, INIT, RESTART_POLICIES, ContainerSpec, EnvVar, PodSpec, Resources, RunAs
from agent.quantity import QuantityError, parse_quantity, to_milli, to_units

__all__ = [
    "ManifestError",
    "ParsedManifest",
    "MAX_MANIFEST_BYTES",
    "MIN_MEMORY_LIMIT_BYTES",
    "parse_manifest",
    "load_document",
    "pod_from_document",
    "manifest_of",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_extended_resource_name",
]

MAX_CONTAINERS = 64
MAX_ENV = 1024
MAX_ARGV = 4096
#: bytes of argv + env of one container (Linux ARG_MAX is 2 MiB; keep well under it)
MAX_CONTAINER_STRINGS = 256 << 10
MAX_STRING = 64 << 10
#: the API server's TotalAnnotationSizeLimitB
MAX_ANNOTATIONS_BYTES = 256 << 10
MAX_DEPTH = 32
#: agent.limits' bound (a UUID's 36 characters), which the device host and CPU plugin enforce too
MAX_UID_LEN = UID_MAX
MAX_GRACE_S = 24 * 3600
#: The smallest memory limit admitted (6 MiB); 0 means no limit, as for the kubelet and runc.
#: Below it a container is OOM-killed before its command does anything: the kernel takes
#: the value as given (v1 rounds it down to a page, so 1 byte is a limit of 0), and the
#: exec of a dynamically linked program with its loader, libc and the page cache it
#: touches is charged to the cgroup at once (``sh -c 'sleep 1'`` alone peaks near
#: 0.6 MiB on this project's Debian hosts; anything real needs a few MiB). Docker's
#: daemon refuses limits below the same 6 MiB, so a manifest that runs there runs here.
MIN_MEMORY_LIMIT_BYTES = 6 << 20

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_UID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")

#: the fields honoured; any other is refused unless ignore_unknown (then warned about one by one)
_TOP = {"apiVersion", "kind", "metadata", "spec"}
_METADATA = {"name", "namespace", "uid", "annotations", "labels"}
_SPEC = {"containers", "initContainers", "restartPolicy", "terminationGracePeriodSeconds", "securityContext",
         "resourceClaims"}
_POD_CLAIM = {"name", "resourceClaimName"}
_CONTAINER_CLAIM = {"name"}
#: the API server's limit on a pod's resourceClaims and a container's resources.claims
MAX_CLAIMS = 32
_SECURITY = {"runAsUser", "runAsGroup", "supplementalGroups"}
#: the largest uid/gid Linux has ((uid_t)-1 means "unchanged" to setuid, so it is not one)
MAX_ID = (1 << 32) - 2
MAX_GROUPS = 64
_CONTAINER = {"name", "command", "args", "env", "workingDir", "resources"}
_RESOURCES = {"requests", "limits", "claims"}
_ENV = {"name", "value"}
_STANDARD_RESOURCES = ("cpu", "memory")

#: Fields every kubectl-written Pod has (``kubectl run --dry-run=client -o yaml``, ``kubectl get -o
#: yaml``) that mean nothing on a node that runs host commands without images, a cluster DNS or a
#: scheduler: taken by name and named in one warning line (``IGNORED_LINE``), so a manifest written
#: for Kubernetes runs without --ignore-unknown-fields. A value set limits the values taken (any
#: other is refused: dnsPolicy None asks for a resolver config hwagent would not apply). The command
#: is still required (an image's entrypoint cannot be guessed), and every field that would change
#: what runs (volumes, ports, hostNetwork, a container's securityContext, ...) is still refused.
_IGNORED_TOP: dict[str, frozenset[str] | None] = {"status": None}
_IGNORED_METADATA: dict[str, frozenset[str] | None] = {
    k: None for k in ("creationTimestamp", "resourceVersion", "generation", "selfLink", "managedFields")}
_IGNORED_SPEC: dict[str, frozenset[str] | None] = {
    "dnsPolicy": frozenset({"ClusterFirst", "ClusterFirstWithHostNet", "Default"}),
    "schedulerName": None, "enableServiceLinks": None}
_IGNORED_CONTAINER: dict[str, frozenset[str] | None] = {
    k: None for k in ("image", "imagePullPolicy", "terminationMessagePath", "terminationMessagePolicy")}
#: the warning that names them
IGNORED_LINE = "ignored, meaningless on a node without images or a cluster: "


class ManifestError(ValueError):
    """A manifest the API server would refuse; ``field`` is the JSON path of the culprit."""

    def __init__(self, field_path: str, message: str) -> None:
        super().__init__(f"{field_path}: {message}" if field_path else message)
        self.field = field_path
        self.reason = message


@dataclass(frozen=True)
class ParsedManifest:
    pod: PodSpec
    #: unknown fields ignored under ignore_unknown, one line each
    warnings: tuple[str, ...] = ()


# --- names ---------------------------------------------------------------------------------


def is_dns1123_label(s: str) -> bool:
    return len(s) <= 63 and bool(_LABEL.match(s))


def is_dns1123_subdomain(s: str) -> bool:
    return 0 < len(s.encode()) <= 253 and all(_LABEL.match(p) for p in s.split("."))


def _is_qualified_name(s: str) -> bool:
    """A label/annotation key: ``[prefix/]name``, prefix a DNS-1123 subdomain, name <= 63."""
    prefix, sep, name = s.rpartition("/")
    if sep and not is_dns1123_subdomain(prefix):
        return False
    return 0 < len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))


def is_extended_resource_name(s: str) -> bool:
    """``domain/name`` outside the ``kubernetes.io`` namespace, as the API server requires."""
    if "/" not in s or not _is_qualified_name(s):
        return False
    domain = s.rpartition("/")[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io") or domain.startswith("requests."))


# --- documents -----------------------------------------------------------------------------


@functools.cache
def _yaml() -> tuple[Any, type]:
    """PyYAML and the strict loader, built on the first YAML document.

    Importing PyYAML costs the daemon's start about 7 ms before READY, and
    neither the embedded defaults (no manifest) nor a JSON manifest, the CLI's
    form, needs it (tests/unit/test_daemon_start_imports.py).
    """
    import yaml

    class _StrictLoader(yaml.SafeLoader):
        """SafeLoader that refuses aliases and duplicate keys and bounds nesting."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise ManifestError("", f"YAML aliases are not accepted (line {event.start_mark.line + 1})")
            self._depth = getattr(self, "_depth", 0) + 1
            try:
                if self._depth > MAX_DEPTH:
                    raise ManifestError("", f"document nests deeper than {MAX_DEPTH} levels")
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    dup = key in seen
                except TypeError:
                    raise ManifestError("", f"mapping key at line {key_node.start_mark.line + 1} is not a string") from None
                if dup:
                    raise ManifestError("", f"duplicate key {key!r} at line {key_node.start_mark.line + 1}")
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return yaml, _StrictLoader


def _load_yaml(text: str) -> list[Any]:
    """Every document in ``text``, read with the strict loader; a YAML error is a ManifestError."""
    yaml, loader = _yaml()
    try:
        return list(yaml.load_all(text, Loader=loader))  # noqa: S506 - strict SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ManifestError("", f"not valid YAML: {problem}{where}") from None


def _json_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ManifestError("", f"duplicate key {k!r}")
        out[k] = v
    return out


def _depth_ok(obj: Any, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise ManifestError("", f"document nests deeper than {MAX_DEPTH} levels")
    if isinstance(obj, dict):
        for v in obj.values():
            _depth_ok(v, depth + 1)
    elif isinstance(obj, list):
        for v in obj:
            _depth_ok(v, depth + 1)


def load_document(raw: bytes | str) -> Any:
    """Bytes of one YAML or JSON document -> plain Python data (bounded, strict)."""
    data = raw.encode() if isinstance(raw, str) else raw
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError("", f"manifest is {len(data)} bytes, more than the {MAX_MANIFEST_BYTES} accepted")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ManifestError("", f"manifest is not UTF-8 text (byte {e.start})") from None
    if "\x00" in text:
        raise ManifestError("", "manifest contains a NUL character")
    stripped = text.lstrip()
    try:
        if stripped.startswith("{"):
            doc = json.loads(text, object_pairs_hook=_json_pairs)
            _depth_ok(doc)
            return doc
        docs = _load_yaml(text)
    except ManifestError:
        raise
    except RecursionError:
        raise ManifestError("", "document nests too deeply") from None
    except json.JSONDecodeError as e:
        raise ManifestError("", f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    docs = [d for d in docs if d is not None]
    if len(docs) != 1:
        raise ManifestError("", f"a manifest holds exactly one Pod, this one holds {len(docs)} documents")
    return docs[0]


# --- the pod -------------------------------------------------------------------------------


@dataclass
class _Ctx:
    ignore_unknown: bool
    warnings: list[str] = field(default_factory=list)
    #: paths of the fields taken and ignored by name (``_IGNORED_*``)
    ignored: list[str] = field(default_factory=list)

    def fields(self, obj: Any, path: str, known: set[str],
               ignorable: dict[str, frozenset[str] | None] | None = None) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise ManifestError(path, f"must be a mapping, got {_kind(obj)}")
        for key in obj:
            if not isinstance(key, str):
                raise ManifestError(path, f"key {key!r} is not a string")
        for key in sorted(set(obj) - known):
            where = f"{path}.{key}" if path else key
            if ignorable is not None and key in ignorable:
                allowed = ignorable[key]
                if allowed is not None and obj[key] not in allowed:
                    raise ManifestError(where, f"{obj[key]!r} is not taken here ({', '.join(sorted(allowed))} are, "
                                        "and mean the host's resolver)")
                self.ignored.append(where)
                continue
            if not self.ignore_unknown:
                raise ManifestError(where, f"unknown field (known here: {', '.join(sorted(known))})")
            self.warnings.append(f"{where}: unknown field ignored")
        return {k: v for k, v in obj.items() if k in known}


def _kind(v: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _string(v: Any, path: str, *, allow_empty: bool = False, limit: int = MAX_STRING) -> str:
    if not isinstance(v, str):
        raise ManifestError(path, f"must be a string, got {_kind(v)}")
    if not v and not allow_empty:
        raise ManifestError(path, "must not be empty")
    if len(v.encode()) > limit:
        raise ManifestError(path, f"is longer than {limit} bytes")
    if "\x00" in v:
        raise ManifestError(path, "contains a NUL character")
    return v


def _string_list(v: Any, path: str, limit: int) -> tuple[str, ...]:
    if not isinstance(v, list):
        raise ManifestError(path, f"must be a list of strings, got {_kind(v)}")
    if len(v) > limit:
        raise ManifestError(path, f"has {len(v)} items, more than {limit}")
    return tuple(_string(s, f"{path}[{i}]", allow_empty=True) for i, s in enumerate(v))


def _string_map(v: Any, path: str, key_ok: Callable[[str], bool], what: str) -> dict[str, str]:
    if not isinstance(v, dict):
        raise ManifestError(path, f"must be a mapping of strings, got {_kind(v)}")
    out: dict[str, str] = {}
    for k, val in v.items():
        if not isinstance(k, str) or not key_ok(k):
            raise ManifestError(f"{path}.{k}", f"is not a valid {what} key ([prefix/]name, name at most 63 characters)")
        out[k] = _string(val, f"{path}.{k}", allow_empty=True, limit=MAX_ANNOTATIONS_BYTES)
    return out


def _int(v: Any, path: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ManifestError(path, f"must be an integer, got {_kind(v)}")
    if not lo <= v <= hi:
        raise ManifestError(path, f"must be in {lo}..{hi}, got {v}")
    return v


def _quantities(v: Any, path: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise ManifestError(path, f"must be a mapping of resource name to quantity, got {_kind(v)}")
    out = {}
    for name, q in v.items():
        where = f"{path}.{name}"
        if not isinstance(name, str) or not (
            name in _STANDARD_RESOURCES or is_extended_resource_name(name) or _HUGEPAGES.match(name)
        ):
            raise ManifestError(
                where,
                "unknown resource: cpu, memory, hugepages-<size> (e.g. hugepages-2Mi), or an extended resource "
                "domain/name outside kubernetes.io (e.g. hwagent.io/loop)",
            )
        try:
            value = parse_quantity(q)
        except QuantityError as e:
            raise ManifestError(where, str(e)) from None
        if value < 0:
            raise ManifestError(where, f"must not be negative, got {q}")
        out[name] = value
    return out


def _check_memory_limit(limit: Any, path: str) -> None:
    """A positive memory limit below ``MIN_MEMORY_LIMIT_BYTES`` is refused (0 is no limit)."""
    if limit is None or limit == 0:
        return
    got = to_units(limit)
    if got < MIN_MEMORY_LIMIT_BYTES:
        raise ManifestError(
            path,
            f"{got} bytes is below the {MIN_MEMORY_LIMIT_BYTES >> 20}Mi ({MIN_MEMORY_LIMIT_BYTES} bytes) a container "
            f"needs to start; set at least {MIN_MEMORY_LIMIT_BYTES >> 20}Mi, or 0 (or no memory limit) for no limit",
        )


def _resources(v: Any, path: str, ctx: _Ctx) -> Resources:
    r = ctx.fields(v, path, _RESOURCES)
    requests = _quantities(r.get("requests") or {}, f"{path}.requests")
    limits = _quantities(r.get("limits") or {}, f"{path}.limits")
    for name, lim in limits.items():
        req = requests.get(name)
        if req is not None and req > lim and name in _STANDARD_RESOURCES:
            raise ManifestError(f"{path}.requests.{name}", f"must be less than or equal to the {name} limit")
    _check_memory_limit(limits.get("memory"), f"{path}.limits.memory")
    # as the API server defaults it: a limit without a request makes the request
    for name, lim in limits.items():
        requests.setdefault(name, lim)
    if limits.get("memory") == 0:
        del limits["memory"]  # 0 is no limit (the kubelet's and runc's meaning), never a 0-byte cgroup
    extended: dict[str, int] = {}
    hugepages: dict[str, int] = {}
    for name in sorted(set(requests) | set(limits)):
        if name in _STANDARD_RESOURCES:
            continue
        if _HUGEPAGES.match(name):
            hugepages.update(_hugepages(name, requests.get(name), limits.get(name), path))
            continue
        req, lim = requests.get(name), limits.get(name)
        if lim is None:
            raise ManifestError(f"{path}.limits.{name}", "must be set for an extended resource (equal to the request)")
        if req != lim:
            raise ManifestError(f"{path}.requests.{name}", "must equal the limit for an extended resource")
        if lim.denominator != 1:
            raise ManifestError(f"{path}.limits.{name}", f"must be a whole number, got {float(lim):g}")
        if lim > 1 << 20:
            raise ManifestError(f"{path}.limits.{name}", "is more devices than any node has")
        if lim > 0:
            extended[name] = int(lim)

    def milli(d: dict[str, Any]) -> int | None:
        return None if "cpu" not in d else to_milli(d["cpu"])

    def units(d: dict[str, Any]) -> int | None:
        return None if "memory" not in d else to_units(d["memory"])

    return Resources(
        cpu_request_milli=milli(requests),
        cpu_limit_milli=milli(limits),
        memory_request_bytes=units(requests),
        memory_limit_bytes=units(limits),
        extended=extended,
        hugepages=hugepages,
        claims=_container_claims(r.get("claims") or [], f"{path}.claims", ctx),
    )


def _container_claims(v: Any, path: str, ctx: _Ctx) -> tuple[str, ...]:
    """``resources.claims``: names of the pod's ``spec.resourceClaims`` (checked against them by the pod)."""
    if not isinstance(v, list):
        raise ManifestError(path, f"must be a list of {{name}}, got {_kind(v)}")
    if len(v) > MAX_CLAIMS:
        raise ManifestError(path, f"has {len(v)} items, more than {MAX_CLAIMS}")
    out: list[str] = []
    for i, item in enumerate(v):
        c = ctx.fields(item, f"{path}[{i}]", _CONTAINER_CLAIM)
        name = _string(c.get("name"), f"{path}[{i}].name", limit=63)
        if name in out:
            raise ManifestError(f"{path}[{i}].name", f"duplicate claim {name!r}")
        out.append(name)
    return tuple(out)


def _pod_claims(v: Any, path: str, ctx: _Ctx) -> dict[str, str]:
    """``spec.resourceClaims``: pod claim name -> ResourceClaim name. Templates need an API
    server to instantiate them; hwagent refuses them rather than run the pod without devices."""
    if not isinstance(v, list):
        raise ManifestError(path, f"must be a list of {{name, resourceClaimName}}, got {_kind(v)}")
    if len(v) > MAX_CLAIMS:
        raise ManifestError(path, f"has {len(v)} items, more than {MAX_CLAIMS}")
    out: dict[str, str] = {}
    for i, item in enumerate(v):
        where = f"{path}[{i}]"
        if isinstance(item, dict) and "resourceClaimTemplateName" in item:
            raise ManifestError(f"{where}.resourceClaimTemplateName", "claim templates are not supported "
                                "(no API server makes claims from them); name a ResourceClaim file with resourceClaimName")
        c = ctx.fields(item, where, _POD_CLAIM)
        name = _string(c.get("name"), f"{where}.name", limit=63)
        if not is_dns1123_label(name):
            raise ManifestError(f"{where}.name", f"{name!r} is not a DNS-1123 label")
        if name in out:
            raise ManifestError(f"{where}.name", f"duplicate pod claim {name!r}")
        if "resourceClaimName" not in c:
            raise ManifestError(f"{where}.resourceClaimName", "is required")
        claim = _string(c["resourceClaimName"], f"{where}.resourceClaimName", limit=253)
        if not is_dns1123_subdomain(claim):
            raise ManifestError(f"{where}.resourceClaimName", f"{claim!r} is not a DNS-1123 subdomain")
        out[name] = claim
    return out


#: hugepages-<size>: the API server's hugepage resource names
_HUGEPAGES = re.compile(r"^hugepages-[1-9][0-9]*(Ki|Mi|Gi|Ti)$")


def _hugepages(name: str, req: Any, lim: Any, path: str) -> dict[str, int]:
    """The API server's hugepage rules: a limit is required, the request equals it, whole bytes."""
    if lim is None:
        raise ManifestError(f"{path}.limits.{name}", "must be set for hugepages (equal to the request)")
    if req != lim:
        raise ManifestError(f"{path}.requests.{name}", "must equal the limit for hugepages")
    if lim.denominator != 1:
        raise ManifestError(f"{path}.limits.{name}", "must be a whole number of bytes")
    return {name: int(lim)} if lim > 0 else {}


def _env(v: Any, path: str, ctx: _Ctx) -> tuple[EnvVar, ...]:
    if not isinstance(v, list):
        raise ManifestError(path, f"must be a list of {{name, value}}, got {_kind(v)}")
    if len(v) > MAX_ENV:
        raise ManifestError(path, f"has {len(v)} items, more than {MAX_ENV}")
    out = []
    for i, item in enumerate(v):
        where = f"{path}[{i}]"
        if isinstance(item, dict) and "valueFrom" in item:
            raise ManifestError(f"{where}.valueFrom", "is not supported on a node without an API server; give value")
        e = ctx.fields(item, where, _ENV)
        if "name" not in e:
            raise ManifestError(f"{where}.name", "is required")
        name = _string(e["name"], f"{where}.name", limit=4096)
        if not _ENV_NAME.match(name):
            raise ManifestError(f"{where}.name", f"{name!r} is not a valid environment variable name")
        out.append(EnvVar(name, _string(e.get("value", ""), f"{where}.value", allow_empty=True)))
    return tuple(out)


def _container(v: Any, path: str, kind: str, ctx: _Ctx) -> ContainerSpec:
    c = ctx.fields(v, path, _CONTAINER, _IGNORED_CONTAINER)
    if "name" not in c:
        raise ManifestError(f"{path}.name", "is required")
    name = _string(c["name"], f"{path}.name")
    if not is_dns1123_label(name):
        raise ManifestError(f"{path}.name", f"{name!r} is not a DNS-1123 label (lowercase a-z, 0-9, '-', at most 63)")
    command = _string_list(c.get("command", []), f"{path}.command", MAX_ARGV)
    args = _string_list(c.get("args", []), f"{path}.args", MAX_ARGV)
    if not command:
        # there is no image to take an entrypoint from
        raise ManifestError(f"{path}.command", "is required (hwagent runs host commands; there is no image entrypoint)")
    if not command[0]:
        raise ManifestError(f"{path}.command[0]", "must not be empty")
    env = _env(c.get("env", []), f"{path}.env", ctx)
    size = sum(len(s.encode()) + 1 for s in command + args) + sum(len(e.name) + len(e.value.encode()) + 2 for e in env)
    if size > MAX_CONTAINER_STRINGS:
        raise ManifestError(path, f"command, args and env add up to {size} bytes, more than {MAX_CONTAINER_STRINGS}")
    wd = c.get("workingDir")
    working_dir = None
    if wd is not None and wd != "":
        working_dir = _string(wd, f"{path}.workingDir", limit=4096)
        if not working_dir.startswith("/"):
            raise ManifestError(f"{path}.workingDir", f"must be an absolute path, got {working_dir!r}")
    res = _resources(c.get("resources") or {}, f"{path}.resources", ctx)
    return ContainerSpec(
        name=name, command=command, args=args, env=env, working_dir=working_dir, resources=res, kind=kind
    )


def _security(v: Any, path: str, ctx: _Ctx) -> RunAs | None:
    """``spec.securityContext``: who the pod runs as, as asked (admission decides
    whether the caller may ask it, and fills in what is left out)."""
    sc = ctx.fields(v, path, _SECURITY)
    if not sc:
        return None
    uid = None if sc.get("runAsUser") is None else _int(sc["runAsUser"], f"{path}.runAsUser", 0, MAX_ID)
    gid = None if sc.get("runAsGroup") is None else _int(sc["runAsGroup"], f"{path}.runAsGroup", 0, MAX_ID)
    raw = sc.get("supplementalGroups") or []
    if not isinstance(raw, list):
        raise ManifestError(f"{path}.supplementalGroups", f"must be a list of group ids, got {_kind(raw)}")
    if len(raw) > MAX_GROUPS:
        raise ManifestError(f"{path}.supplementalGroups", f"has {len(raw)} items, more than {MAX_GROUPS}")
    groups = tuple(_int(g, f"{path}.supplementalGroups[{i}]", 0, MAX_ID) for i, g in enumerate(raw))
    return RunAs(uid, gid, tuple(dict.fromkeys(groups)))


def _containers(v: Any, path: str, kind: str, ctx: _Ctx) -> tuple[ContainerSpec, ...]:
    if not isinstance(v, list):
        raise ManifestError(path, f"must be a list of containers, got {_kind(v)}")
    if len(v) > MAX_CONTAINERS:
        raise ManifestError(path, f"has {len(v)} containers, more than {MAX_CONTAINERS}")
    return tuple(_container(c, f"{path}[{i}]", kind, ctx) for i, c in enumerate(v))


def _metadata_uid(meta: dict[str, Any], new_uid: Callable[[], str]) -> str:
    """metadata.uid as given, or a new one when absent or empty."""
    uid = meta.get("uid")
    if uid is None or uid == "":
        return new_uid()
    uid = _string(uid, "metadata.uid", limit=MAX_UID_LEN)
    if not _UID.match(uid):
        raise ManifestError("metadata.uid", "may hold only A-Z, a-z, 0-9, '.', '_' and '-'")
    return uid


def _annotations_and_labels(meta: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """metadata.annotations (bounded in total size) and metadata.labels (valid label values)."""
    annotations = _string_map(meta.get("annotations") or {}, "metadata.annotations", _is_qualified_name, "annotation")
    total = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if total > MAX_ANNOTATIONS_BYTES:
        raise ManifestError("metadata.annotations", f"add up to {total} bytes, more than {MAX_ANNOTATIONS_BYTES}")
    labels = _string_map(meta.get("labels") or {}, "metadata.labels", _is_qualified_name, "label")
    for k, v in labels.items():
        if len(v) > 63 or not _LABEL_VALUE.match(v):
            raise ManifestError(f"metadata.labels.{k}", f"{v!r} is not a valid label value")
    return annotations, labels


def pod_from_document(
    doc: Any,
    *,
    ignore_unknown: bool = False,
    source: str = "api",
    new_uid: Callable[[], str] = lambda: str(uuid.uuid4()),
) -> ParsedManifest:
    """A loaded document -> a validated PodSpec (a UID is generated when absent)."""
    ctx = _Ctx(ignore_unknown)
    top = ctx.fields(doc, "", _TOP, _IGNORED_TOP)
    api_version = top.get("apiVersion", "v1")
    if api_version != "v1":
        raise ManifestError("apiVersion", f"must be v1, got {api_version!r}")
    kind = top.get("kind", "Pod")
    if kind != "Pod":
        raise ManifestError("kind", f"must be Pod, got {kind!r}")
    meta = ctx.fields(top.get("metadata"), "metadata", _METADATA, _IGNORED_METADATA) if "metadata" in top else {}
    if "name" not in meta:
        raise ManifestError("metadata.name", "is required")
    name = _string(meta["name"], "metadata.name", limit=253)
    if not is_dns1123_subdomain(name):
        raise ManifestError(
            "metadata.name", f"{name!r} is not a DNS-1123 subdomain (lowercase a-z, 0-9, '-', '.', at most 253 bytes)"
        )
    namespace = _string(meta.get("namespace", "default"), "metadata.namespace", limit=63)
    if not is_dns1123_label(namespace):
        raise ManifestError("metadata.namespace", f"{namespace!r} is not a DNS-1123 label")
    uid = _metadata_uid(meta, new_uid)
    annotations, labels = _annotations_and_labels(meta)

    if "spec" not in top:
        raise ManifestError("spec", "is required")
    spec = ctx.fields(top["spec"], "spec", _SPEC, _IGNORED_SPEC)
    if "containers" not in spec:
        raise ManifestError("spec.containers", "is required")
    containers = _containers(spec["containers"], "spec.containers", APP, ctx)
    if not containers:
        raise ManifestError("spec.containers", "must hold at least one container")
    init = _containers(spec.get("initContainers") or [], "spec.initContainers", INIT, ctx)
    seen: dict[str, str] = {}
    for i, c in enumerate(init + containers):
        where = f"spec.initContainers[{i}]" if i < len(init) else f"spec.containers[{i - len(init)}]"
        if c.name in seen:
            raise ManifestError(f"{where}.name", f"duplicate container name {c.name!r} (also {seen[c.name]})")
        seen[c.name] = where
    restart = spec.get("restartPolicy", "Always")
    if restart not in RESTART_POLICIES:
        raise ManifestError("spec.restartPolicy", f"must be one of {', '.join(RESTART_POLICIES)}, got {restart!r}")
    grace = _int(spec.get("terminationGracePeriodSeconds", 30), "spec.terminationGracePeriodSeconds", 0, MAX_GRACE_S)
    run_as = _security(spec.get("securityContext") or {}, "spec.securityContext", ctx)
    claims = _pod_claims(spec.get("resourceClaims") or [], "spec.resourceClaims", ctx)
    for i, c in enumerate(init + containers):
        where = f"spec.initContainers[{i}]" if i < len(init) else f"spec.containers[{i - len(init)}]"
        for j, used in enumerate(c.resources.claims):
            if used not in claims:
                raise ManifestError(f"{where}.resources.claims[{j}].name",
                                    f"{used!r} is not one of spec.resourceClaims")
    pod = PodSpec(
        name=name,
        namespace=namespace,
        uid=uid,
        containers=containers,
        init_containers=init,
        annotations=annotations,
        labels=labels,
        restart_policy=restart,
        termination_grace_period_s=grace,
        source=source,
        run_as=run_as,
        resource_claims=claims,
    )
    ignored = [IGNORED_LINE + ", ".join(sorted(ctx.ignored))] if ctx.ignored else []
    return ParsedManifest(pod, (*ctx.warnings, *ignored))


def parse_manifest(
    raw: bytes | str,
    *,
    ignore_unknown: bool = False,
    source: str = "api",
    new_uid: Callable[[], str] | None = None,
) -> ParsedManifest:
    """YAML/JSON text of one Pod -> a validated PodSpec."""
    doc = load_document(raw)
    kwargs: dict[str, Any] = {"ignore_unknown": ignore_unknown, "source": source}
    if new_uid is not None:
        kwargs["new_uid"] = new_uid
    return pod_from_document(doc, **kwargs)


def _security_of(r: RunAs) -> dict[str, Any]:
    sc: dict[str, Any] = {"runAsUser": r.uid, "runAsGroup": r.gid, "supplementalGroups": list(r.groups)}
    return {k: v for k, v in sc.items() if v is not None and v != []}


def manifest_of(pod: PodSpec) -> dict[str, Any]:
    """The Pod document that ``pod_from_document`` reads back to an equal spec."""

    def quantities(r: Resources, which: str) -> dict[str, str]:
        out: dict[str, str] = {}
        cpu = r.cpu_request_milli if which == "requests" else r.cpu_limit_milli
        mem = r.memory_request_bytes if which == "requests" else r.memory_limit_bytes
        if cpu is not None:
            out["cpu"] = f"{cpu}m"
        if mem is not None:
            out["memory"] = str(mem)
        for k, v in {**r.extended, **r.hugepages}.items():
            out[k] = str(v)
        return out

    def container(c: ContainerSpec) -> dict[str, Any]:
        d: dict[str, Any] = {"name": c.name, "command": list(c.command)}
        if c.args:
            d["args"] = list(c.args)
        if c.env:
            d["env"] = [{"name": e.name, "value": e.value} for e in c.env]
        if c.working_dir:
            d["workingDir"] = c.working_dir
        res: dict[str, Any] = {k: q for k in ("requests", "limits") if (q := quantities(c.resources, k))}
        res.update({"claims": [{"name": n} for n in c.resources.claims]} if c.resources.claims else {})
        if res:
            d["resources"] = res
        return d

    spec: dict[str, Any] = {
        "containers": [container(c) for c in pod.containers],
        "restartPolicy": pod.restart_policy,
        "terminationGracePeriodSeconds": pod.termination_grace_period_s,
    }
    if pod.init_containers:
        spec["initContainers"] = [container(c) for c in pod.init_containers]
    if pod.run_as is not None:
        spec["securityContext"] = _security_of(pod.run_as)
    spec.update({"resourceClaims": [{"name": k, "resourceClaimName": v} for k, v in pod.resource_claims.items()]}
                if pod.resource_claims else {})
    meta: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
    if pod.annotations:
        meta["annotations"] = dict(pod.annotations)
    if pod.labels:
        meta["labels"] = dict(pod.labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

