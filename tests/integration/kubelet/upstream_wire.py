"""Message classes and gRPC stubs built from the *upstream* fingerprint table, not from proto/.

The fake kubelet and the Katalyst test client must not share hwagent's .proto
files, or a wrong field number would be wrong on both sides and pass. Here
every message, field, enum and method comes from
tests/unit/data/upstream_proto_fingerprint.txt (rendered from the upstream
files), turned back into descriptors at run time. Fields whose message type the
table does not carry (the parts of core/v1 hwagent does not use) are dropped:
an independent peer that simply does not know them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

TABLE = Path(__file__).resolve().parents[2] / "unit" / "data" / "upstream_proto_fingerprint.txt"
#: section -> (proto syntax, sections it depends on)
FILES = {
    "k8s/meta/v1": ("proto2", ()),
    "k8s/core/v1": ("proto2", ("k8s/meta/v1",)),
    "evictionplugin/v1alpha1": ("proto3", ("k8s/core/v1",)),
    "pluginregistration/v1": ("proto3", ()),
    "podresources/v1": ("proto3", ()),
}

F = descriptor_pb2.FieldDescriptorProto


def _sections() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for raw in TABLE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            cur = out.setdefault(line[1:-1], [])
        elif cur is not None:
            cur.append(line)
    return out


def _build(section: str, lines: list[str], syntax: str, known: set[str]) -> descriptor_pb2.FileDescriptorProto:
    pkg = next(line.split()[1] for line in lines if line.startswith("package "))
    fdp = descriptor_pb2.FileDescriptorProto(name=f"upstream/{section}.proto", package=pkg, syntax=syntax)
    msgs, enums = _add_types(fdp, pkg, lines)
    known |= {f"{pkg}.{m}" for m in msgs} | {f"{pkg}.{e}" for e in enums}
    for line in sorted((ln for ln in lines if ln.startswith("enum_value ")), key=lambda ln: int(ln.split()[2])):
        parts = _rel(pkg, line.split()[1])
        enums[".".join(parts[:-1])].value.add(name=parts[-1], number=int(line.split()[2]))
    _add_fields(msgs, pkg, lines, known)
    _drop_unbuildable_maps(msgs, pkg, known)
    _add_services(fdp, lines)
    return fdp


def _rel(pkg: str, full: str) -> list[str]:
    return full[len(pkg) + 1:].split(".")


def _add_types(fdp: descriptor_pb2.FileDescriptorProto, pkg: str, lines: list[str]) -> tuple[
        dict[str, descriptor_pb2.DescriptorProto], dict[str, descriptor_pb2.EnumDescriptorProto]]:
    """Messages (outer before nested), map entries and enums, by their name relative to the package."""
    msgs: dict[str, descriptor_pb2.DescriptorProto] = {}
    enums: dict[str, descriptor_pb2.EnumDescriptorProto] = {}
    for line in sorted(ln for ln in lines if ln.startswith("message ")):
        parts = _rel(pkg, line.split()[1])
        if len(parts) == 1:
            msgs[parts[0]] = fdp.message_type.add(name=parts[0])
        else:
            parent = msgs[".".join(parts[:-1])]
            msgs[".".join(parts)] = parent.nested_type.add(name=parts[-1])
    for line in lines:
        w = line.split()
        if w[0] == "map_entry":
            msgs[".".join(_rel(pkg, w[1]))].options.map_entry = True
        elif w[0] == "enum":
            parts = _rel(pkg, w[1])
            holder = fdp if len(parts) == 1 else msgs[".".join(parts[:-1])]
            enums[".".join(parts)] = holder.enum_type.add(name=parts[-1])
    return msgs, enums


def _add_fields(msgs: dict[str, descriptor_pb2.DescriptorProto], pkg: str, lines: list[str], known: set[str]) -> None:
    for line in lines:
        w = line.split()
        if w[0] != "field":
            continue
        parts = _rel(pkg, w[1])
        owner = ".".join(parts[:-1])
        if owner not in msgs:
            continue
        type_name = w[5]
        if type_name != "-" and type_name not in known:
            continue  # a type the table does not carry: this peer does not know the field
        f = msgs[owner].field.add(name=parts[-1], number=int(w[2]), type=F.Type.Value(w[3]),
                                  label=F.Label.Value(w[4]))
        if type_name != "-":
            f.type_name = "." + type_name


def _drop_unbuildable_maps(msgs: dict[str, descriptor_pb2.DescriptorProto], pkg: str, known: set[str]) -> None:
    """A map whose value type the table does not carry cannot be built: drop the entry and the map field."""
    for name, m in list(msgs.items()):
        if m.options.map_entry and len(m.field) != 2:
            parent = msgs[name.rsplit(".", 1)[0]]
            parent.nested_type.remove(m)
            gone = f".{pkg}.{name}"
            for f in [f for f in parent.field if f.type_name == gone]:
                parent.field.remove(f)
            known.discard(gone[1:])


def _add_services(fdp: descriptor_pb2.FileDescriptorProto, lines: list[str]) -> None:
    svcs: dict[str, descriptor_pb2.ServiceDescriptorProto] = {}
    for line in lines:
        w = line.split()
        if w[0] == "rpc":
            _, svc, method = w[1].split("/")
            s = svcs.get(svc) or svcs.setdefault(svc, fdp.service.add(name=svc.rsplit(".", 1)[1]))
            s.method.add(name=method, input_type="." + w[2], output_type="." + w[4],
                         client_streaming=w[5].endswith("1"), server_streaming=w[6].endswith("1"))


class Wire:
    """Classes by full name (``wire["evictionplugin.v1alpha1.Empty"]``) and stub calls."""

    def __init__(self) -> None:
        sections = _sections()
        self.pool = descriptor_pool.DescriptorPool()
        known: set[str] = set()
        for section, (syntax, deps) in FILES.items():
            fdp = _build(section, sections[section], syntax, known)
            fdp.dependency.extend(f"upstream/{d}.proto" for d in deps)
            self.pool.Add(fdp)

    def __getitem__(self, full_name: str) -> Any:
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(full_name))

    def unary(self, channel: grpc.Channel, path: str) -> Callable[..., Any]:
        """A client callable for ``/pkg.Service/Method``."""
        svc, method = path.strip("/").split("/")
        m = self.pool.FindServiceByName(svc).FindMethodByName(method)
        out = self[m.output_type.full_name]
        return channel.unary_unary(path, request_serializer=lambda r: r.SerializeToString(),
                                   response_deserializer=out.FromString)

    def handler(self, path: str, fn: Callable[[Any, Any], Any]) -> tuple[str, str, grpc.RpcMethodHandler]:
        svc, method = path.strip("/").split("/")
        m = self.pool.FindServiceByName(svc).FindMethodByName(method)
        inp = self[m.input_type.full_name]
        return svc, method, grpc.unary_unary_rpc_method_handler(
            fn, request_deserializer=inp.FromString, response_serializer=lambda r: r.SerializeToString())

    def server_handlers(self, routes: dict[str, Callable[[Any, Any], Any]]) -> list[grpc.GenericRpcHandler]:
        by_svc: dict[str, dict[str, grpc.RpcMethodHandler]] = {}
        for path, fn in routes.items():
            svc, method, h = self.handler(path, fn)
            by_svc.setdefault(svc, {})[method] = h
        return [grpc.method_handlers_generic_handler(s, hs) for s, hs in by_svc.items()]
