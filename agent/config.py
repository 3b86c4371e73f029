"""TOML configuration with typed sections, strict about unknown keys and types.

Each concern owns its section as a frozen dataclass in its own package and is
listed in ``SECTIONS`` below (section name -> "module:Class", imported only when
a config is loaded). This module only knows how to load, validate and override;
it never knows what a section means.

A reader looks a section up by its typed key, declared next to the dataclass
(``agent.cpu.config.CPU_SECTION``, a ``SectionKey[CPUConfig]``), the way a
component looks a handle up by its ``HandleKey``: ``config[CPU_SECTION]`` is a
``CPUConfig`` to mypy, so type checking goes on past the config lookup instead
of stopping at an ``Any``. A string lookup is refused.

Validation is strict on purpose: a typo'd key in a node agent's config would
otherwise silently fall back to a default and change placement of workloads.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import functools
import json
import math
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

from agent.eventlog import get_logger

__all__ = ["Config", "ConfigError", "SectionKey", "dumps", "load", "loads", "SECTIONS", "section_defaults"]

S = TypeVar("S")

#: section name -> "module:DataclassName". Every field needs a default.
SECTIONS: dict[str, str] = {
    "daemon": "agent.daemonconfig:DaemonConfig",
    "cpu": "agent.cpu.config:CPUConfig",
    "memory": "agent.memory.config:MemoryConfig",
    "devicemanager": "agent.devicemanager.config:DeviceManagerConfig",
    "devices": "agent.devices.config:DevicesConfig",
    "pressure": "agent.pressure.config:PressureConfig",
    "topology_manager": "agent.topologymanager.config:TopologyManagerConfig",
    "workloads": "agent.workloads.config:WorkloadsConfig",
    "runtime": "agent.runtime.config:RuntimeConfig",
    "kubelet": "agent.kubelet.config:KubeletConfig",
    "cgroups": "agent.cgroups.config:CgroupsConfig",
    "dra": "agent.dra.config:DraConfig",
    "advisor": "agent.advisor.config:AdvisorConfig",
    "nri": "agent.nri.config:NriConfig",
    "slurm": "agent.slurm.config:SlurmConfig",
}

log = get_logger("hwagent.config")


class ConfigError(ValueError):
    """The config file is unreadable, malformed, or names a bad key/type."""


@dataclasses.dataclass(frozen=True)
class SectionKey(Generic[S]):
    """The typed name of a config section: ``config[key]`` is an ``S``.

    Declared beside the section's dataclass (``CPU_SECTION = SectionKey("cpu", CPUConfig)``),
    so importing the key imports only that section's module, never the registry's others.
    """

    name: str
    cls: type[S]

    def __repr__(self) -> str:
        return f"SectionKey({self.name!r}, {self.cls.__name__})"


def _section_class(name: str) -> type:
    mod, _, cls = SECTIONS[name].partition(":")
    return getattr(importlib.import_module(mod), cls)


@functools.cache
def _deprecated_keys() -> dict[tuple[str, str], tuple[str, str]]:
    """(old section, old key) -> (section, key) for every key a section took over.

    A section lists them in a ``DEPRECATED_KEYS`` class attribute ("old.key" -> its
    key), so a setting can move to the section that owns it without breaking a file.
    """
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for name in SECTIONS:
        for old, new in getattr(_section_class(name), "DEPRECATED_KEYS", {}).items():
            old_section, _, old_key = old.partition(".")
            out[(old_section, old_key)] = (name, new)
    return out


@functools.cache
def _obsolete_keys() -> dict[tuple[str, str], str]:
    """(section, key) -> why it does nothing now, for keys a section no longer has.

    A section lists them in an ``OBSOLETE_KEYS`` class attribute. A file that still
    sets one loads (it did before), with a warning saying the value is ignored,
    instead of a setting that is silently accepted and never read.
    """
    out: dict[tuple[str, str], str] = {}
    for name in SECTIONS:
        for key, why in getattr(_section_class(name), "OBSOLETE_KEYS", {}).items():
            out[(name, key)] = why
    return out


def _drop_obsolete(data: dict[str, Any], where: str) -> None:
    for (section, key), why in _obsolete_keys().items():
        table = data.get(section)
        if isinstance(table, dict) and key in table:
            del table[key]
            log.warning("config key ignored", key=f"{section}.{key}", why=why, where=where)


def _move_deprecated(data: dict[str, Any], where: str) -> None:
    """Move values spelled the old way to their new section, with one warning each.

    The value is checked against its new key's type here, so an error still names
    the key the user wrote; the old and the new spelling together must agree.
    """
    for (old_section, old_key), (name, key) in _deprecated_keys().items():
        table = data.get(old_section)
        if not isinstance(table, dict) or old_key not in table:
            continue
        old, new = f"{old_section}.{old_key}", f"{name}.{key}"
        hint = typing.get_type_hints(_section_class(name))[key]
        try:
            raw = table.pop(old_key)
            value = _check_type(raw, hint, f"{old} (now {new})")
            target = data.setdefault(name, {})
            if not isinstance(target, dict):
                continue  # reported as "must be a table" by the caller
            if key in target and _check_type(target[key], hint, new) != value:
                raise ConfigError(f"{old} is the old spelling of {new} and the two disagree: set only {new}")
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None
        target.setdefault(key, raw)  # checked again, with its section, as the file's own value
        log.warning("config key deprecated", key=old, use=new, where=where)


def _check_type(value: Any, tp: Any, where: str) -> Any:
    """Check (and lightly coerce: int -> float) a TOML value against a type hint."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        return _check_union(value, tp, where)
    if origin is typing.Literal:
        return _check_literal(value, tp, where)
    if origin in (list, tuple):
        return _check_sequence(value, tp, origin, where)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table, got {_type_name(value)}")
        _kt, vt = typing.get_args(tp) or (str, Any)
        return {k: _check_type(v, vt, f"{where}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table, got {_type_name(value)}")
        return _build(tp, value, where)
    return _check_scalar(value, tp, where)


def _check_union(value: Any, tp: Any, where: str) -> Any:
    errors = []
    for arm in typing.get_args(tp):
        if arm is type(None):
            if value is None:
                return None
            continue
        try:
            return _check_type(value, arm, where)
        except ConfigError as e:
            errors.append(str(e))
    if len(errors) > 1:
        # name every form that would fit ("an integer or \"auto\""), not only the first arm's
        parts = [e.removeprefix(f"{where}: ") for e in errors]
        if all(", got " in p for p in parts):
            wants = " or ".join(p.rsplit(", got ", 1)[0] for p in parts)
            raise ConfigError(f"{where}: {wants}, got {parts[-1].rsplit(', got ', 1)[1]}")
        raise ConfigError(f"{where}: " + "; or ".join(parts))
    raise ConfigError(errors[0] if errors else f"{where}: unexpected value {value!r}")


def _check_literal(value: Any, tp: Any, where: str) -> Any:
    allowed = typing.get_args(tp)
    # compare with the type too: in Python True == 1 and 1 == 1.0
    if not any(type(value) is type(a) and value == a for a in allowed):
        raise ConfigError(f"{where}: must be one of {', '.join(map(_toml_repr, allowed))}, got {_toml_repr(value)}")
    return value


def _check_sequence(value: Any, tp: Any, origin: Any, where: str) -> Any:
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list, got {_type_name(value)}")
    args = typing.get_args(tp)
    if origin is tuple and args and args[-1] is not Ellipsis:
        if len(value) != len(args):
            raise ConfigError(f"{where}: expected a list of {len(args)} items, got {len(value)}")
        return tuple(_check_type(v, t, f"{where}[{i}]") for i, (v, t) in enumerate(zip(value, args, strict=True)))
    item_t = args[0] if args else Any
    items = [_check_type(v, item_t, f"{where}[{i}]") for i, v in enumerate(value)]
    return tuple(items) if origin is tuple else items


def _check_scalar(value: Any, tp: Any, where: str) -> Any:
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {_type_name(value)}")
        if math.isnan(value):
            raise ConfigError(f"{where}: expected a number, got nan")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {_type_name(value)}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {_toml_repr(value)}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {_type_name(value)}")
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{where}: expected {tp.__name__}, got {_type_name(value)}")
    return value


def _type_name(value: Any) -> str:
    """TOML's word for a value's type, since that is what the user wrote."""
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string",
             list: "an array", dict: "a table"}
    return names.get(type(value), type(value).__name__)


def _toml_repr(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def _unknown_key(where: str, key: str, known: Iterable[str], what: str = "key") -> ConfigError:
    known = sorted(known)
    hint = difflib.get_close_matches(key, known, n=1)
    did_you_mean = f"did you mean {hint[0]!r}? " if hint else ""
    subject = f"{where}.{key}: unknown key" if what == "key" else f"{where}: unknown {what} [{key}]"
    return ConfigError(f"{subject} ({did_you_mean}known: {', '.join(known)})")


def _check_fields(cls: type, table: Mapping[str, Any], where: str) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    for key in sorted(table):
        if key not in fields:
            raise _unknown_key(where, key, fields)
    return {k: _check_type(v, hints[k], f"{where}.{k}") for k, v in table.items()}


def _validated(obj: Any, where: str) -> Any:
    """Run the section's own ``validate()``; "key: reason" errors are reported as ``where.key``."""
    validate = getattr(obj, "validate", None)
    if callable(validate):
        try:
            validate()
        except ValueError as e:
            key, sep, reason = str(e).partition(": ")
            if sep and key in {f.name for f in dataclasses.fields(obj)}:
                raise ConfigError(f"{where}.{key}: {reason}") from None
            raise ConfigError(f"{where}: {e}") from None
    return obj


def _build(cls: type, table: Mapping[str, Any], where: str) -> Any:
    return _validated(cls(**_check_fields(cls, table, where)), where)


@dataclasses.dataclass(frozen=True)
class Config:
    """All sections, by name; read one with its typed key: ``config[CPU_SECTION]``."""

    sections: Mapping[str, Any]
    path: Path | None = None

    def __getitem__(self, key: SectionKey[S]) -> S:
        if not isinstance(key, SectionKey):
            raise TypeError(f"config[{key!r}]: look a section up by its key (e.g. {str(key).upper()}_SECTION "
                            f"beside its dataclass), so the type checker knows what it holds")
        section = self.sections[key.name]
        if not isinstance(section, key.cls):
            raise TypeError(f"[{key.name}] is a {type(section).__name__}, not the {key.cls.__name__} {key!r} "
                            "names: the key and SECTIONS disagree")
        return section

    def replace(self, name: str, **changes: Any) -> Config:
        """A copy with some fields of one section changed (CLI flags override the file).

        The changes pass the same type checks and ``validate()`` as the file, so a
        flag cannot smuggle in a value the file would have been refused for.
        """
        if name not in self.sections:
            raise _unknown_key("<override>", name, self.sections, what="section")
        moved = {k: changes.pop(k) for k in list(changes) if (name, k) in _deprecated_keys()}
        if moved:
            table: dict[str, Any] = {name: moved}
            _move_deprecated(table, "<override>")
            out = self
            for section, values in table.items():
                if values:
                    out = out.replace(section, **values)
            return out.replace(name, **changes) if changes else out
        current = self.sections[name]
        checked = _check_fields(type(current), changes, name)
        new = dict(self.sections)
        new[name] = _validated(dataclasses.replace(current, **checked), name)
        return Config(new, self.path)

    def as_dict(self) -> dict[str, Any]:
        return {k: dataclasses.asdict(v) for k, v in self.sections.items()}


def section_defaults() -> Config:
    return Config({name: _section_class(name)() for name in SECTIONS})


def loads(text: str, path: Path | None = None) -> Config:
    where = str(path) if path else "<config>"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where}: not valid TOML: {e}") from None
    for name in sorted(data):
        if name not in SECTIONS:
            raise _unknown_key(where, name, SECTIONS, what="section")
    _drop_obsolete(data, where)
    _move_deprecated(data, where)
    sections: dict[str, Any] = {}
    for name in SECTIONS:
        table = data.get(name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: {name} must be a table ([{name}]), got {_type_name(table)}")
        try:
            sections[name] = _build(_section_class(name), table, name)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None
    return Config(sections, path)


def load(path: str | Path | None) -> Config:
    """Load a config file; None means the embedded defaults."""
    if path is None:
        return section_defaults()
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read config {p}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: not UTF-8 text (byte {e.start})") from None
    return loads(text, p)


def dumps(config: Config) -> str:
    """The config as TOML that ``loads`` reads back to an equal Config.

    Keys whose value is None (an optional setting left unset) have no TOML
    spelling; they are written as comments so the output still names them.
    """
    out: list[str] = []
    for name, section in config.sections.items():
        if out:
            out.append("")
        out.append(f"[{name}]")
        _dump_table(dataclasses.asdict(section), name, out)
    return "\n".join(out) + "\n"


def _dump_table(table: Mapping[str, Any], prefix: str, out: list[str]) -> None:
    subtables = []
    for key, value in table.items():
        if isinstance(value, dict):
            subtables.append((key, value))
        elif value is None:
            out.append(f"# {_toml_key(key)} is unset")
        else:
            out.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in subtables:
        name = f"{prefix}.{_toml_key(key)}"
        out.append("")
        out.append(f"[{name}]")
        _dump_table(value, name, out)


def _toml_key(key: str) -> str:
    bare = key and all(c.isascii() and (c.isalnum() or c in "-_") for c in key)
    return key if bare else json.dumps(key, ensure_ascii=False)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        # a JSON string of printable text is a valid TOML basic string
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # inside an array: an inline table
        items = (f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items() if v is not None)
        return "{ " + ", ".join(items) + " }" if value else "{}"
    raise TypeError(f"no TOML spelling for {type(value).__name__}")
