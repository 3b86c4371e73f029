"""The component framework: the small interface every long-running part of the
daemon implements, the context it is started with, and the typed keys handles
are published under.

It lives in ``agent.contracts``, below the owners, so a component depends on the
framework without depending on the daemon that assembles it (``agent.daemon``
sits above every owner).

The daemon owns one asyncio loop. Components (device-plugin host, built-in
device plugins, CPU policy, probes) are started in order and stopped in
reverse; each gets the same ``DaemonContext``. Nothing else is shared, so a
component can be started alone in a test with a context built by hand.

Handles pass between components only through the context's typed keys
(``HandleKey``; the keys and contracts are in ``agent.contracts``): ``publish`` in the producer's start(), ``lookup`` in a
later consumer's start(), ``deferred`` where the producer starts later. Once
every component has started the daemon calls ``freeze()``: nothing is published
after that (a handle appearing mid-run would be a wiring bug). A stopping
component may still ``withdraw`` its handle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar, cast, runtime_checkable

from agent.config import Config
from agent.eventlog import EventLogger, get_logger
from agent.safepath import ensure_dir
from agent.topology.model import Topology

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True)
class HandleKey(Generic[T]):
    """The typed name of a published handle (like aiohttp's ``AppKey``): ``lookup(key)``
    returns a ``T``, so a consumer asking for the wrong contract is a mypy error."""

    name: str


class Deferred(Protocol[T_co]):
    """A handle published by a component that starts later: None until it is published."""

    def __call__(self) -> T_co | None: ...


@dataclass
class DaemonContext:
    config: Config
    root_dir: Path
    topology: Topology
    #: "standalone" or "kubelet", decided once at start (config mode=auto resolved)
    mode: str = "standalone"
    log: EventLogger = field(default_factory=lambda: get_logger("hwagent"))
    #: set by the daemon: ask it to shut down (reason, failed) from inside a component
    on_stop_request: Callable[[str, bool], None] | None = field(default=None, repr=False)
    #: files the daemon unlinks at exit if their owner did not (see remove_on_exit)
    exit_paths: list[Path] = field(default_factory=list, repr=False)
    #: why ``mode`` was chosen, as the daemon logged it
    mode_reason: str = ""
    #: set by the daemon: (component name, healthy) of every started component, for status
    component_health: Callable[[], list[tuple[str, bool]]] | None = field(default=None, repr=False)
    #: the published handles by key name; only through publish/lookup/deferred/withdraw
    _handles: dict[str, object] = field(default_factory=dict, init=False, repr=False)
    _frozen: bool = field(default=False, init=False, repr=False)

    def path(self, *parts: str) -> Path:
        """A path under the root dir, created as a directory chain for the parent
        (owner-only; a symbolic link on the way is refused, never followed: agent.safepath)."""
        if len(parts) > 1:
            ensure_dir(self.root_dir, parts[:-1], mode=0o700, tighten=False)
        return self.root_dir.joinpath(*parts)

    def publish(self, key: HandleKey[T], handle: T) -> None:
        """Make a handle available to components started after this one (and to deferred references)."""
        if self._frozen:
            raise RuntimeError(f"{key.name!r} published after start: the context is frozen")
        if key.name in self._handles:
            raise RuntimeError(f"{key.name!r} published twice")
        self._handles[key.name] = handle

    def lookup(self, key: HandleKey[T]) -> T | None:
        """A handle a component started earlier published, or None (disabled, or not started)."""
        return cast("T | None", self._handles.get(key.name))

    def deferred(self, key: HandleKey[T]) -> Deferred[T]:
        """A reference to a handle published by a component that starts later (the
        real cycles in start order: the device manager and the CPU policy start
        before admission, whose registry says which pods are active; admission
        before the runtime it hands pods to). It answers None until the producer
        published, then the handle, None again once withdrawn.

        It resolves at publication, not only at freeze: a static manifest admitted
        while later components still start must reach the runtime as soon as the
        runtime took its restore snapshot, or it would never run."""

        def resolve() -> T | None:
            return self.lookup(key)

        return resolve

    def withdraw(self, key: HandleKey[T]) -> None:
        """A stopping component takes its handle back: lookups and deferred references answer None."""
        self._handles.pop(key.name, None)

    def freeze(self) -> None:
        """Every component has started: no more publishing."""
        self._frozen = True

    @property
    def frozen(self) -> bool:
        return self._frozen

    def remove_on_exit(self, path: Path) -> Path:
        """Register a socket or file the daemon must not leave behind.

        A safety net only: components still remove what they created in stop();
        the daemon unlinks whatever is left after every component has stopped.
        """
        self.exit_paths.append(Path(path))
        return Path(path)

    def request_stop(self, reason: str, failed: bool = True) -> None:
        """Shut the daemon down, e.g. when a background task of a component died.

        ``failed`` makes the daemon exit non-zero so systemd's Restart=on-failure
        brings it back. Outside a daemon (a component tested alone) this raises.
        """
        if self.on_stop_request is None:
            raise RuntimeError(f"no daemon to stop ({reason})")
        self.on_stop_request(reason, failed)


@runtime_checkable
class Component(Protocol):
    name: str

    async def start(self, ctx: DaemonContext) -> None:
        """Bring the component up. Raise to abort daemon start with a clear message."""

    async def stop(self) -> None:
        """Release everything start() created (sockets, cgroups it owns, BPF programs)."""

    def healthy(self) -> bool:
        """Whether /healthz should report this component as working."""


#: what a "module:factory" entry of agent.daemon.COMPONENTS names; None = disabled
ComponentFactory = Callable[[DaemonContext], "Component | None"]
