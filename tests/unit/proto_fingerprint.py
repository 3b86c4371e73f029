"""Wire fingerprint of a compiled .proto: the facts a peer on the wire depends on.

One text line per service, method (with streaming flags), message, field (name,
number, type, label, type name, proto3-optional) and enum value. Comments,
options and file paths are left out on purpose: they do not reach the wire.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2


def _message_lines(prefix: str, msg: descriptor_pb2.DescriptorProto) -> list[str]:
    name = f"{prefix}.{msg.name}"
    lines = [f"message {name}"]
    for f in msg.field:
        type_name = f.type_name.lstrip(".") or "-"
        label = descriptor_pb2.FieldDescriptorProto.Label.Name(f.label)
        ftype = descriptor_pb2.FieldDescriptorProto.Type.Name(f.type)
        optional = " proto3_optional" if f.proto3_optional else ""
        lines.append(f"field {name}.{f.name} {f.number} {ftype} {label} {type_name}{optional}")
    for nested in msg.nested_type:
        lines.extend(_message_lines(name, nested))
        if nested.options.map_entry:
            lines.append(f"map_entry {name}.{nested.name}")
    for enum in msg.enum_type:
        lines.extend(_enum_lines(name, enum))
    return lines


def _enum_lines(prefix: str, enum: descriptor_pb2.EnumDescriptorProto) -> list[str]:
    name = f"{prefix}.{enum.name}"
    return [f"enum {name}"] + [f"enum_value {name}.{v.name} {v.number}" for v in enum.value]


def fingerprint(fdp: descriptor_pb2.FileDescriptorProto) -> list[str]:
    """Sorted fingerprint lines of one file, every name fully qualified."""
    pkg = fdp.package
    lines = [f"package {pkg}"]
    for svc in fdp.service:
        lines.append(f"service {pkg}.{svc.name}")
        for m in svc.method:
            lines.append(
                f"rpc /{pkg}.{svc.name}/{m.name} {m.input_type.lstrip('.')} -> "
                f"{m.output_type.lstrip('.')} client_streaming={int(m.client_streaming)} "
                f"server_streaming={int(m.server_streaming)}"
            )
    for msg in fdp.message_type:
        lines.extend(_message_lines(pkg, msg))
    for enum in fdp.enum_type:
        lines.extend(_enum_lines(pkg, enum))
    return sorted(lines)


def from_module(module) -> list[str]:  # module: a generated *_pb2
    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.ParseFromString(module.DESCRIPTOR.serialized_pb)
    return fingerprint(fdp)
