"""The contracts speak in values the contracts own: no Protocol in ``agent.contracts``
hands a consumer a component's implementation object.

Every Protocol exported by ``agent.contracts`` is inspected with
``typing.get_type_hints`` (so every name in a signature must resolve at run time,
not only under ``TYPE_CHECKING``): its attributes, its properties' return types,
and its methods' parameters and return types, down through the arguments of
generic types (``list[X]``, ``dict[str, X | None]``, ``Deferred[X]``) and the
fields of the value types the contracts define.

The allowed homes of a type, and why:

- ``agent.contracts`` (the package and its modules): the handles and the values
  that cross components live here, below every owner, so a consumer depends on
  the contract and never on a producer's package;
- ``agent.cpuset``: ``CPUSet`` is a plain value in the bottom layer that every
  package already shares (the Linux list format), not any component's state;
- the standard library and builtins (``str``, ``Path``, ``Mapping``, ...).

Anything else (``agent.cpu.policy.DynamicPolicy``, a device-plugin server, an
owner's record class) is an owner's detail: the contract member must become a
value query instead.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import subprocess
import sys
import types
import typing

from collections.abc import Sequence
from typing import Protocol

import agent.contracts as contracts
from agent.topology.model import Topology

ALLOWED_PREFIXES = ("agent.contracts", "agent.cpuset")


def _allowed_module(module: str) -> bool:
    if module == "builtins" or module.split(".")[0] in sys.stdlib_module_names:
        return True
    return any(module == p or module.startswith(p + ".") for p in ALLOWED_PREFIXES)


def _types_inside(tp: object) -> typing.Iterator[object]:
    """The type and every type nested in its generic arguments (unions, containers, Callables)."""
    yield tp
    for arg in typing.get_args(tp):
        if isinstance(arg, list):  # Callable[[A, B], R]
            for a in arg:
                yield from _types_inside(a)
        else:
            yield from _types_inside(arg)


class _PackageNames(dict[str, object]):
    """The names of agent.contracts as attribute access finds them: its value types
    are imported on first use (``_LAZY``), not with the package."""

    def __missing__(self, name: str) -> object:
        try:
            return getattr(contracts, name)
        except AttributeError:
            raise KeyError(name) from None


def _hints(obj: object, where: str, out: dict[str, object]) -> dict[str, object]:
    """``get_type_hints``; a name that does not resolve at run time (imported only
    under TYPE_CHECKING, i.e. from an owner) is reported as such instead."""
    try:
        return typing.get_type_hints(obj, localns=_PackageNames())
    except NameError as e:
        out[where] = f"unresolved {e.name}"
        return {}


def _member_hints(proto: type) -> dict[str, object]:
    """name -> annotated type of every attribute, property and method parameter of a Protocol."""
    out: dict[str, object] = {}
    own = {k: v for base in reversed(proto.__mro__) if base.__module__ not in ("typing", "builtins")
           for k, v in vars(base).items()}
    out.update(_hints(proto, proto.__qualname__, out))
    for name, value in own.items():
        if name.startswith("__"):
            continue
        func = value.fget if isinstance(value, property) else value
        if not inspect.isfunction(func):
            continue
        for param, tp in _hints(func, f"{name}()", out).items():
            out[f"{name}({param})" if param != "return" else f"{name}()"] = tp
    return out


def foreign_types(protocols: typing.Iterable[type]) -> list[str]:
    """'Protocol.member: type (module)' for every type from outside the allowed homes."""
    bad: list[str] = []
    seen: set[type] = set()

    def check(where: str, tp: object) -> None:
        if isinstance(tp, str):  # a name only an owner's module defines
            bad.append(f"{where}: {tp}")
            return
        for t in _types_inside(tp):
            origin = typing.get_origin(t) or t
            if origin in (None, type(None), typing.Union, types.UnionType, typing.Literal) or not isinstance(origin, type):
                continue
            module = getattr(origin, "__module__", "")
            if not _allowed_module(module):
                bad.append(f"{where}: {origin.__qualname__} ({module})")
            elif module.startswith("agent.contracts") and dataclasses.is_dataclass(origin) and origin not in seen:
                seen.add(origin)
                for field, ftp in typing.get_type_hints(origin).items():
                    check(f"{origin.__qualname__}.{field}", ftp)

    for proto in protocols:
        for member, tp in _member_hints(proto).items():
            check(f"{proto.__qualname__}.{member}", tp)
    return sorted(set(bad))


#: The component framework is not a contract between components: ``Component.start``
#: takes the ``DaemonContext``, which carries the config, the topology and the logger
#: from the bottom layer by design.
FRAMEWORK = frozenset({"Component", "Deferred"})

#: Members that still hand out an owner's object, named exactly (a new one fails, and
#: so does one that is gone but still listed): none left.
KNOWN_FOREIGN: frozenset[str] = frozenset()


def exported_protocols() -> list[type]:
    return [obj for name in contracts.__all__ if isinstance(obj := getattr(contracts, name), type)
            and getattr(obj, "_is_protocol", False) and name not in FRAMEWORK]


def test_the_contracts_name_only_values_they_own():
    protocols = exported_protocols()
    assert len(protocols) >= 12  # the walk sees the contracts (not an empty list that always passes)
    assert set(foreign_types(protocols)) == KNOWN_FOREIGN


class Leaky(Protocol):
    current: Topology

    def many(self) -> Sequence[dict[str, Topology | None]]: ...

    @property
    def one(self) -> int: ...


def test_the_check_finds_an_owners_class_in_a_signature_and_inside_a_generic():
    assert foreign_types([Leaky]) == [
        "Leaky.current: Topology (agent.topology.model)",
        "Leaky.many(): Topology (agent.topology.model)",
    ]


def test_the_package_loads_a_contract_module_when_one_of_its_names_is_used():
    """``import agent.contracts`` loads the component framework only (issue 24: READY paid 45-58 ms
    for every contract module and the device plugin's protobuf classes); a name is its module's object."""
    child = (
        "import sys, agent.contracts as c\n"
        "print(sorted(m for m in sys.modules if m.startswith('agent.contracts.')))\n"
        "from agent.contracts import AllocationInfo\n"
        "import agent.contracts.cpu as cpu\n"
        "assert AllocationInfo is cpu.AllocationInfo is c.AllocationInfo\n"
        "assert 'agent.contracts.devices' not in sys.modules\n"
        "try:\n"
        "    from agent.contracts import NoSuchContract\n"
        "except ImportError as e:\n"
        "    print('refused', e.name)\n"
    )
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded, refused = proc.stdout.splitlines()
    assert loaded == "['agent.contracts.component']"
    assert refused == "refused agent.contracts"
    for name, module in contracts._LAZY.items():
        assert getattr(contracts, name) is getattr(importlib.import_module(f"agent.contracts.{module}"), name)
