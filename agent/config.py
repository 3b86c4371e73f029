"""TOML configuration with typed sections, strict about unknown keys and types.

Each concern owns its section as a frozen dataclass in its own package and is
listed in ``SECTIONS`` below (section name -> "module:Class"). This module only
knows how to load, validate and override; it never knows what a section means.

Validation is strict on purpose: a typo'd key in a node agent's config would
otherwise silently fall back to a default and change placement of workloads.
"""

from __future__ import annotations

import dataclasses
import importlib
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["Config", "ConfigError", "load", "SECTIONS", "section_defaults"]

#: section name -> "module:DataclassName". Every field needs a default.
SECTIONS: dict[str, str] = {
    "daemon": "agent.daemon_config:DaemonConfig",
    "devicemanager": "agent.devicemanager.config:DeviceManagerConfig",
    "devices": "agent.devices.config:DevicesConfig",
    "pressure": "agent.pressure.config:PressureConfig",
}


class ConfigError(ValueError):
    """The config file is unreadable, malformed, or names a bad key/type."""


def _section_class(name: str) -> type:
    mod, _, cls = SECTIONS[name].partition(":")
    return getattr(importlib.import_module(mod), cls)


def _check_type(value: Any, tp: Any, where: str) -> Any:
    """Check (and lightly coerce: int -> float) a TOML value against a type hint."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
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
        raise ConfigError(errors[0] if errors else f"{where}: unexpected value {value!r}")
    if typing.get_origin(tp) is typing.Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ConfigError(f"{where}: must be one of {', '.join(map(repr, allowed))}, got {value!r}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        args = typing.get_args(tp)
        item_t = args[0] if args else Any
        items = [_check_type(v, item_t, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table, got {type(value).__name__}")
        kt, vt = typing.get_args(tp) or (str, Any)
        return {k: _check_type(v, vt, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table, got {type(value).__name__}")
        return _build(tp, value, where)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {type(value).__name__}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {type(value).__name__}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {type(value).__name__}")
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{where}: expected {tp.__name__}, got {type(value).__name__}")
    return value


def _build(cls: type, table: Mapping[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(table) - set(fields))
    if unknown:
        known = ", ".join(sorted(fields))
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known keys: {known})")
    kwargs = {k: _check_type(v, hints[k], f"{where}.{k}") for k, v in table.items()}
    obj = cls(**kwargs)
    validate = getattr(obj, "validate", None)
    if callable(validate):
        try:
            validate()
        except ValueError as e:
            raise ConfigError(f"{where}: {e}") from None
    return obj


@dataclasses.dataclass(frozen=True)
class Config:
    """All sections, by name. ``config.section("cpu")`` or ``config["cpu"]``."""

    sections: Mapping[str, Any]
    path: Path | None = None

    def __getitem__(self, name: str) -> Any:
        return self.sections[name]

    section = __getitem__

    def replace(self, name: str, **changes: Any) -> Config:
        """A copy with some fields of one section changed (CLI flags override the file)."""
        new = dict(self.sections)
        new[name] = dataclasses.replace(new[name], **changes)
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
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown section [{unknown[0]}] (known sections: {', '.join(sorted(SECTIONS))})"
        )
    sections: dict[str, Any] = {}
    for name in SECTIONS:
        table = data.get(name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: {name} must be a table")
        sections[name] = _build(_section_class(name), table, name)
    return Config(sections, path)


def load(path: str | Path | None) -> Config:
    """Load a config file; None means the embedded defaults."""
    if path is None:
        return section_defaults()
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config {p}: {e.strerror}") from None
    return loads(text, p)
