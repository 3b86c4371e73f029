"""The hwagent daemon: one asyncio loop that owns every component.

Start: lock the root dir, decide the mode, read the topology once, claim the
cgroup subtrees and CPUs it manages (agent.daemon.claim: a second daemon that
would manage the same ones exits 2 naming the first), open the metrics/health
endpoint, start the components of ``COMPONENTS`` in order, tell
systemd READY. Stop (SIGTERM/SIGINT, or a component asking): STOPPING, stop the
components in reverse, close the endpoint, remove what the daemon created
(pid file, registered sockets), exit 0. SIGHUP re-reads the config and applies
what can change live (agent.daemon.reload); the rest is logged as needing a
restart. A component that fails to start stops the ones already started and
the daemon exits 1 naming it.

Heavy imports (grpc, bcc) belong inside components' start(), not at module
level of the factories, so ``hwagent run`` is up in well under a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import importlib
import logging
import os
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent.config import Config, ConfigError
from agent.daemon.claim import ClaimConflict, ClaimLock, managed_claim
from agent.daemon.lockholders import holders_of, squatted
from agent.daemon.running import try_flock
from agent.contracts import Component, ComponentFactory, DaemonContext
from agent.daemonconfig import DAEMON_SECTION, DaemonConfig, parse_host_port
from agent.daemon.metrics_http import HealthReport, MetricsServer
from agent.daemon.reload import DAEMON_LIVE_SETTINGS, plan_reload
from agent.daemon.sdnotify import Notifier, watchdog_interval
from agent.eventlog import get_logger
from agent.daemon import rootmodes as root_modes
from agent.safepath import open_dir
from agent.tasks import cancel_and_wait
from agent.topology.model import Topology

__all__ = [
    "COMPONENTS",
    "NEEDS",
    "off_before_import",
    "ROOT_LAYOUT",
    "Daemon",
    "DaemonConflict",
    "DaemonError",
    "load_factory",
    "prepare_root",
    "resolve_mode",
]

log = get_logger("hwagent.daemon")

#: "module:factory" for every component, in start order (stopped in reverse).
#: ``factory(ctx) -> Component | None``; None means disabled by config or mode.
#: A component looks up (``ctx.lookup``) only what an earlier one published; what a
#: later one publishes it holds as ``ctx.deferred`` (see agent.contracts).
COMPONENTS: tuple[str, ...] = (
    # first: the host removes stale sockets in device-plugins/ before any built-in plugin binds there.
    # Publishes DEVICE_MANAGER; active pods, CPU policy and registry (pod-resources) are deferred
    "agent.devicemanager.component:factory",
    # publishes DEVICE_HEALTH, DEVICE_PLUGINS
    "agent.deviceplugin.component:factory",
    # publishes DRA_DRIVER (both modes) and DRA_POD_CLAIMS (standalone), before admission looks them up
    "agent.dra.component:factory",
    # publishes CPU_POLICY; active pods (residual cleanup) deferred
    "agent.cpu.component:create",
    # publishes MEMORY_MANAGER (before admission, which looks it up); active pods (residual cleanup) deferred
    "agent.memory.component:create",
    # after the CPU policy and the device manager (looked up): restores the registry, then
    # publishes WORKLOADS and ACTIVE_PODS (nothing is cleaned up before); the runtime is deferred
    "agent.workloads.component:factory",
    # [nri] on, both modes: hwagent as the runtime's NRI plugin; looks up CPU_POLICY, MEMORY_MANAGER,
    # DEVICE_MANAGER and WORKLOADS (standalone: pods it must not touch); publishes NRI_PLUGIN and NRI_PODS
    "agent.nri.component:factory",
    # kubelet mode: who runs in which cgroup (POD_DIRECTORY), before pressure labels its signals with it
    "agent.kubelet.component:factory",
    # [slurm] on (standalone mode): who runs in which Slurm cgroup (POD_DIRECTORY), before pressure
    "agent.slurm.component:factory",
    # [slurm] on with preemptible partitions/QOS: looks up POD_DIRECTORY (the Slurm jobs'); suppresses, then requeues
    "agent.slurm.preempt:factory",
    # looks up CPU_POLICY, DEVICE_MANAGER, DEVICE_HEALTH, POD_DIRECTORY; publishes PRESSURE
    "agent.pressure.component:factory",
    # after admission: restores the pods its registry (WORKLOADS) holds; publishes RUNTIME
    "agent.runtime.component:factory",
    # [advisor] on: looks up CPU_POLICY, CPU_SHARED_POOL, PRESSURE; publishes EVICTION_GATE (pressure's, deferred)
    "agent.advisor.component:factory",
    # kubelet mode: looks up PRESSURE, DEVICE_HEALTH, POD_DIRECTORY; publishes EVICTION_PLUGIN
    "agent.kubelet.evictionplugin:factory",
    # kubelet mode: the memory plugin (ResourcePlugin "memory") over MEMORY_MANAGER (looked up)
    "agent.memory.plugin:factory",
    # kubelet mode, [dra] on: the DRA driver's kubelet plugin (plugins_registry/ and plugins/<driver>/dra.sock);
    # DRA_DRIVER deferred, DEVICE_PLUGINS looked up
    "agent.dra.kubeletplugin.component:factory",
    # [slurm] on with drain: looks up DEVICE_PLUGINS; drains the node through scontrol while a device is unhealthy
    "agent.slurm.drainer:factory",
    # last: answers `hwagent status` about everything above (looks every handle up)
    "agent.status.component:factory",
)

#: What an entry of COMPONENTS needs to be on, read before its module is imported:
#: (the mode it runs in or None for both, the config section whose ``enabled`` it needs
#: or None). A standalone start imported the kubelet-mode components and the advisor (off
#: by default) only for their factories to say no: ~8 ms of CPU and 26 modules before
#: READY (issue 24). The factory still decides the rest (tests/unit/daemon/test_component_gate.py
#: checks that each entry ruled out here is one its factory refuses).
NEEDS: Mapping[str, tuple[str | None, str | None]] = {
    "agent.devicemanager.component:factory": ("standalone", "devicemanager"),
    "agent.workloads.component:factory": ("standalone", "workloads"),
    "agent.kubelet.component:factory": ("kubelet", None),
    "agent.slurm.component:factory": ("standalone", "slurm"),
    "agent.slurm.drainer:factory": ("standalone", "slurm"),
    "agent.slurm.preempt:factory": ("standalone", "slurm"),
    "agent.runtime.component:factory": ("standalone", "runtime"),
    "agent.advisor.component:factory": (None, "advisor"),
    "agent.kubelet.evictionplugin:factory": ("kubelet", None),
    "agent.memory.plugin:factory": ("kubelet", None),
    "agent.dra.kubeletplugin.component:factory": ("kubelet", "dra"),
    "agent.nri.component:factory": (None, "nri"),
}


def off_before_import(spec: str, mode: str, config: Config) -> str | None:
    """Why the entry ``spec`` is off in ``mode`` with ``config``, known without importing
    its module; None when only its factory can tell (then it is imported and asked)."""
    want_mode, section = NEEDS.get(spec, (None, None))
    if want_mode is not None and mode != want_mode:
        return f"{want_mode} mode only (mode is {mode})"
    if section is not None and section in config.sections and not getattr(config.sections[section], "enabled", True):
        return f"[{section}] enabled = false"
    return None


#: directories under the root dir, after the kubelet's own layout
#: (/var/lib/kubelet/{device-plugins,plugins_registry,pod-resources}) so that
#: upstream device plugins and pod-resources clients find their sockets where
#: they expect them when pointed at hwagent's root instead of the kubelet's.
#: cpu/ holds the CPU policy's state (the device manager's checkpoint is in device-plugins/, as the kubelet's).
ROOT_LAYOUT: tuple[str, ...] = ("device-plugins", "plugins_registry", "pod-resources", "cpu")

#: the root dir is passed by anyone and listed by root only (agent.daemon.rootmodes: who may
#: read what); the subdirs hold sockets that grant control of the node, so only root and its
#: group enter.
ROOT_MODE = root_modes.ROOT_MODE
SUBDIR_MODE = 0o750

PID_FILE = "hwagent.pid"

#: process exit codes
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2



#: the full-collection threshold while starting: in effect never (``defer_full_collections``)
_NO_FULL_COLLECTION = 1 << 30


def defer_full_collections() -> tuple[int, int, int]:
    """Until READY, no automatic full (generation 2) collection; returns the thresholds to put back.

    Start-up builds what lives as long as the process (modules, topology, every pod's restored
    state), so each full collection the allocator triggered re-walked all of it and found
    nothing to free: three of them, 108 ms of a 5,000-pod restart's CPU to READY (issue 37
    item 17). The young generations are still collected as they fill; the one full collection
    that ``freeze_startup_heap`` runs after READY frees what start-up left in cycles."""
    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], _NO_FULL_COLLECTION)
    return before


def freeze_startup_heap(thresholds: tuple[int, int, int] | None = None) -> None:
    """Move everything start-up allocated (modules, topology, restored state,
    BPF tables) out of the cyclic GC's reach; then ``thresholds`` (what
    ``defer_full_collections`` returned) apply again.

    Those objects live as long as the process; left in the collected
    generations, every full collection re-walks them, which showed up as ~15 ms
    pauses in Allocate's p99 with 1,000 containers (bench/cpu.py).
    """
    gc.collect()
    gc.freeze()
    if thresholds is not None:
        gc.set_threshold(*thresholds)

class DaemonError(Exception):
    """Start-up cannot go on; the message is the one line the operator sees."""

    #: the process exit status it ends in
    exit_code = EXIT_FAILED


class DaemonConflict(DaemonError):
    """Another daemon manages what this one would; restarting cannot help, the operator must choose."""

    exit_code = EXIT_CONFIG


# --- pure decisions ----------------------------------------------------------------------


def resolve_mode(cfg: DaemonConfig) -> tuple[str, str]:
    """(mode, why): ``auto`` becomes kubelet mode only when the kubelet's registration socket is there."""
    if cfg.mode != "auto":
        return cfg.mode, f"mode = {cfg.mode!r} in config"
    sock = Path(cfg.kubelet_root_dir) / "device-plugins" / "kubelet.sock"
    try:
        st = sock.stat()
    except FileNotFoundError:
        return "standalone", f"no kubelet registration socket at {sock}"
    except OSError as e:
        return "standalone", f"cannot stat {sock}: {e.strerror}"
    if stat.S_ISSOCK(st.st_mode):
        return "kubelet", f"kubelet registration socket found at {sock}"
    return "standalone", f"{sock} exists but is not a socket"


def load_factory(spec: str) -> ComponentFactory:
    """"package.module:factory" -> the callable; DaemonError names the bad entry."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise DaemonError(f"component entry {spec!r} is not 'module:factory'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise DaemonError(f"component {spec}: cannot import {module_name}: {e}") from e
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise DaemonError(f"component {spec}: {module_name} has no callable {attr!r}")
    return factory


# --- root dir -----------------------------------------------------------------------------


def prepare_root(root: Path, layout: Iterable[str] = ROOT_LAYOUT) -> list[Path]:
    """Create the root dir and its layout; returns the directories created now.

    Existing directories keep their mode (the operator may have chosen one), but
    a root dir anyone can write to is refused: a stranger could plant a socket
    where device plugins would register. A layout directory that is a symbolic
    link (or not a directory) is refused too, never followed (agent.safepath).
    Then root's state is closed to others, in a root dir an earlier version made too
    (``agent.daemon.rootmodes``: modes only narrow).
    """
    created: list[Path] = []
    for path, mode in [(root, ROOT_MODE), *((root / d, SUBDIR_MODE) for d in layout)]:
        try:
            path.mkdir(mode=mode)
        except FileExistsError:
            if not path.is_dir():
                raise DaemonError(f"{path} exists and is not a directory") from None
            continue
        except FileNotFoundError:
            path.mkdir(mode=mode, parents=True)
        except OSError as e:
            raise DaemonError(f"cannot create {path}: {e.strerror}") from None
        os.chmod(path, mode)  # mkdir's mode is filtered by the umask
        created.append(path)
    st = root.stat()
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        raise DaemonError(f"root dir {root} is writable by everyone; use a directory only root can write")
    for d in layout:  # a link planted there would take sockets and checkpoints elsewhere
        try:
            os.close(open_dir(root, d, tighten=False))
        except OSError as e:
            raise DaemonError(e.strerror or str(e)) from None
    try:
        narrowed = root_modes.tighten_root(root)
    except OSError as e:
        raise DaemonError(f"cannot close {e.filename or root} to other users: {e.strerror or e}") from None
    if narrowed:
        log.info("root dir modes narrowed", root_dir=root, changed=len(narrowed), paths=",".join(narrowed[:10]))
    return created


class PidFile:
    """``<root>/hwagent.pid``, held under flock so two daemons never share a root dir."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Lock the file (root's, 0600: ``flock`` needs no write access, so a file others may open
        is one they may lock). A file only other users' processes hold (opened while an earlier
        version left it 0644) is a squatter's: it is replaced by a fresh one, which is locked."""
        fd = -1
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            taken = try_flock(fd, fcntl.LOCK_EX)
            if not taken and squatted(fd):
                log.warning("lock file held by another user replaced", path=str(self.path),
                            holders=",".join(map(str, holders_of(fd))))
                os.close(fd)
                fd = -1
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
                taken = try_flock(fd, fcntl.LOCK_EX)
            if not taken:
                other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                raise DaemonError(f"another hwagent (pid {other}) is running with root dir {self.path.parent}")
            os.fchmod(fd, 0o600)  # as an earlier version left it (0644): closed to others from now on
        except BaseException as e:
            if fd >= 0:
                os.close(fd)
            if isinstance(e, OSError):
                raise DaemonError(f"cannot lock {self.path}: {e.strerror}") from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        # unlink while still holding the lock, so a new daemon never locks a file about to vanish
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None


# --- the daemon ---------------------------------------------------------------------------


@dataclass
class _Started:
    spec: str
    component: Component

    @property
    def name(self) -> str:
        return str(getattr(self.component, "name", self.spec))


@dataclass
class Daemon:
    """One run of the daemon. ``await run()`` returns the process exit code."""

    config: Config
    #: "module:factory" entries; None means the module's COMPONENTS as it is at run()
    components: tuple[str, ...] | None = None
    #: (sysfs_root, procfs_root) -> Topology; the sysfs reader unless a test passes another
    topology_reader: Callable[[str, str], Topology] | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    #: re-reads the config (file, then the same CLI flags) on SIGHUP; None: reload unsupported
    reload_config: Callable[[], Config] | None = None

    #: set once the endpoint is bound: ("127.0.0.1", 9464)
    metrics_address: tuple[str, int] | None = field(default=None, init=False)
    phase: str = field(default="new", init=False)
    _started: list[_Started] = field(default_factory=list, init=False)
    _stop: asyncio.Event | None = field(default=None, init=False)
    _failure: str | None = field(default=None, init=False)
    _failure_code: int = field(default=EXIT_FAILED, init=False)
    _reloading: asyncio.Task[None] | None = field(default=None, init=False)
    _notifier: Notifier | None = field(default=None, init=False)
    _running_status: str = field(default="running", init=False)

    @property
    def cfg(self) -> DaemonConfig:
        return self.config[DAEMON_SECTION]

    # --- health -----------------------------------------------------------------------

    def component_health(self) -> list[tuple[str, bool]]:
        out = []
        for s in self._started:
            try:
                ok = bool(s.component.healthy())
            except Exception:
                log.exception("health check raised", component=s.name)
                ok = False
            out.append((s.name, ok))
        return out

    def component_readiness(self) -> list[tuple[str, bool, str]]:
        """(name, ready, detail) per started component. A component without ready()
        is ready once started; one with it (pressure: probes compiling) says so itself."""
        out = []
        for s in self._started:
            ready_fn = getattr(s.component, "ready", None)
            detail_fn = getattr(s.component, "readiness", None)
            try:
                ready = bool(ready_fn()) if callable(ready_fn) else True
                detail = str(detail_fn()) if callable(detail_fn) else ("ready" if ready else "not ready")
            except Exception:
                log.exception("readiness check raised", component=s.name)
                ready, detail = False, "readiness check raised"
            out.append((s.name, ready, detail))
        return out

    def health(self) -> HealthReport:
        if self.phase != "running":
            return HealthReport(False, self.phase)
        healthy = dict(self.component_health())
        lines = tuple(
            f"{name}: {'healthy' if healthy.get(name, False) else 'UNHEALTHY'}, {'ready' if ready else 'not ready'}"
            + ("" if detail in ("ready", "not ready") else f": {detail}")
            for name, ready, detail in self.component_readiness()
        )
        bad = [name for name, ok in healthy.items() if not ok]
        if bad:
            return HealthReport(False, f"unhealthy: {', '.join(bad)}", lines)
        return HealthReport(True, "", lines)

    # --- reload -----------------------------------------------------------------------

    def request_reload(self) -> None:
        """SIGHUP: re-read the config and apply what can change live (on the loop)."""
        if self.phase != "running":
            log.info("config reload ignored", phase=self.phase)
            return
        if self._reloading is not None and not self._reloading.done():
            log.info("config reload already in progress")
            return
        self._reloading = asyncio.get_running_loop().create_task(self._reload(), name="config-reload")

    async def _reload(self) -> None:
        if self.reload_config is None:
            log.warning("config reload unsupported", reason="the daemon was not started from a config source")
            return
        if self._notifier is not None:
            self._notifier.status("reloading config")
        try:
            loaded = await asyncio.to_thread(self.reload_config)
            live = {"daemon": DAEMON_LIVE_SETTINGS}
            for s in self._started:
                settings = getattr(s.component, "live_settings", None)
                if settings and s.name in self.config.sections:
                    live[s.name] = frozenset(settings)
            plan = plan_reload(self.config, loaded, live)
        except ConfigError as e:
            log.error("config reload refused", error=str(e), note="running on with the config in effect")
            self._status_running()
            return
        except Exception as e:
            log.error(
                "config reload failed", error=f"{type(e).__name__}: {e}", note="running on with the config in effect",
            )
            self._status_running()
            return
        self.config = plan.effective
        if "daemon.log_level" in plan.applied:
            from agent.daemon.logs import LEVELS

            logging.getLogger("hwagent").setLevel(LEVELS[self.cfg.log_level])
        for s in self._started:
            if s.name in plan.live_sections and s.name != "daemon":
                try:
                    s.component.reconfigure(self.config.sections[s.name])  # type: ignore[attr-defined]
                except Exception as e:
                    log.error("component reconfigure failed", component=s.name, error=repr(e))
        if plan.needs_restart:
            log.warning("config changes need a restart", settings=",".join(plan.needs_restart))
        log.info(
            "config reloaded", applied=",".join(plan.applied) or "none",
            needs_restart=",".join(plan.needs_restart) or "none",
        )
        self._status_running()

    def _status_running(self) -> None:
        if self._notifier is not None and self.phase == "running":
            self._notifier.status(self._running_status)

    # --- control ------------------------------------------------------------------------

    def request_stop(self, reason: str, failed: bool = False) -> None:
        """Begin shutdown (idempotent). Safe to call from signal handlers on the loop."""
        if self._stop is None:
            return
        if self._stop.is_set():
            log.info("already stopping", reason=reason)
            return
        if failed and self._failure is None:
            self._failure = reason
        (log.error if failed else log.info)("stop requested", reason=reason)
        self._stop.set()

    def _stop_requested_by_component(self, reason: str, failed: bool = True) -> None:
        """``ctx.request_stop``: a component asking to stop is a failure unless it says otherwise."""
        self.request_stop(reason, failed)

    def _install_signal_handlers(self, loop: asyncio.AbstractEventLoop) -> tuple[signal.Signals, ...]:
        """SIGTERM/SIGINT stop, SIGHUP reloads the config; returns the signals handled (none off the main thread)."""
        handled = _stop_signals()
        for sig in handled:
            loop.add_signal_handler(sig, self.request_stop, f"signal {sig.name}", False)
        if handled:  # main thread: SIGHUP reloads the config, as daemons do
            loop.add_signal_handler(signal.SIGHUP, self.request_reload)
            handled = (*handled, signal.SIGHUP)
        return handled

    async def _serve_metrics(self) -> MetricsServer:
        """Open /metrics and /healthz on ``metrics_address``; a port in use is a start-up failure."""
        address = self.cfg.metrics_address
        host, port = parse_host_port(address)
        server = MetricsServer(host, port, self.health)
        try:
            await server.start()
        except OSError as e:
            reason = os.strerror(e.errno) if e.errno else str(e)
            raise DaemonError(f"cannot listen on metrics_address {address}: {reason}") from None
        self.metrics_address = server.address
        return server

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        notifier = Notifier.from_env(self.environ)
        cfg = self.cfg
        root = Path(cfg.root_dir)
        pidfile = PidFile(root / PID_FILE)
        claim = ClaimLock(cfg.lock_dir)
        server: MetricsServer | None = None
        watchdog: asyncio.Task[None] | None = None
        unregister: Callable[[], None] | None = None
        ctx: DaemonContext | None = None
        sockets_before: set[Path] = set()
        self._notifier = notifier
        handled = self._install_signal_handlers(loop)
        t0 = time.monotonic()
        thresholds = defer_full_collections()
        try:
            notifier.status("starting")
            interval = watchdog_interval(self.environ, os.getpid())
            if interval is not None and notifier.enabled:
                watchdog = asyncio.create_task(_watchdog(notifier, interval), name="sd-watchdog")

            self.phase = "starting"
            from agent.daemon.fdlimit import raise_nofile

            raise_nofile()  # soft to hard: users' connections are lent from it (agent.workloads.connlimit)
            created = prepare_root(root)
            if created:
                log.info("created root dir layout", root_dir=root, dirs_created=len(created))
            pidfile.acquire()
            sockets_before = set(_sockets_under(root))

            from agent import __version__
            from agent.daemon.checks import config_warnings

            source = str(self.config.path) if self.config.path else "embedded defaults"
            log.info("hwagent starting", version=__version__, config=source, root_dir=root)
            mode, why = resolve_mode(cfg)
            log.info("mode resolved", mode=mode, why=why)

            topo = await asyncio.to_thread(self._read_topology)
            _log_topology(topo)
            self._claim(claim, topo)  # before any component touches a cgroup
            for warning in config_warnings(self.config, topo):
                log.warning("config value cannot apply", warning=warning)

            from agent.daemon import metrics  # prometheus_client objects; import only when serving

            metrics.publish_build_info()
            metrics.publish_topology(topo)
            unregister = metrics.register_collector(metrics.ComponentHealthCollector(self.component_health))

            server = await self._serve_metrics()
            log.info("metrics endpoint listening", address=_hostport(server.address), url=server.url)

            ctx = DaemonContext(
                config=self.config,
                root_dir=root,
                topology=topo,
                mode=mode,
                log=get_logger("hwagent"),
                # No ACTIVE_PODS yet: until the admission path publishes a source,
                # nobody can tell a gone pod from an unlisted one, and an empty set
                # would make the first allocation release every checkpointed pod.
                on_stop_request=self._stop_requested_by_component,
                mode_reason=why,
                component_health=self.component_health,
            )
            if await self._start_components(ctx, notifier):
                self.phase = "running"
                status = f"running: mode={mode} components={len(self._started)} metrics={server.url}/metrics"
                self._running_status = status
                notifier.ready(status=status)
                freeze_startup_heap(thresholds)  # after READY: the collection is no start-up work
                log.info(
                    "hwagent ready", mode=mode, components=len(self._started),
                    component_names=",".join(c.name for c in self._started),
                    startup_seconds=f"{time.monotonic() - t0:.3f}",
                )
                await self._stop.wait()
        except DaemonError as e:
            log.error("cannot start", error=str(e))
            self._failure = str(e)
            self._failure_code = e.exit_code
        finally:
            gc.set_threshold(*thresholds)  # a start that failed or was stopped before READY, too
            self.phase = "stopping"
            await cancel_and_wait(self._reloading)
            notifier.stopping(status="stopping")
            stop_failed = await self._stop_components()
            if server is not None:
                await server.stop()
            if unregister is not None:
                unregister()
            await cancel_and_wait(watchdog)
            if ctx is not None:
                _remove_paths(ctx.exit_paths)
            if pidfile.held:  # otherwise the sockets under root belong to the daemon that holds it
                _report_leftovers(root, sockets_before)
            claim.release()
            pidfile.release()
            for sig in handled:
                loop.remove_signal_handler(sig)
            notifier.close()
            self.phase = "stopped"
            if stop_failed and self._failure is None:
                self._failure = "a component did not stop cleanly"
            log.info("hwagent stopped", clean=self._failure is None)
        return self._exit_code()

    def _exit_code(self) -> int:
        return self._failure_code if self._failure else EXIT_OK

    def _claim(self, lock: ClaimLock, topo: Topology) -> None:
        """Claim the cgroup subtrees and CPUs this daemon manages, machine-wide (agent.daemon.claim)."""
        claim = managed_claim(self.config, topo, os.getpid())
        try:
            lock.acquire(claim)
        except ClaimConflict as e:
            raise DaemonConflict(str(e)) from None
        except OSError as e:
            raise DaemonError(f"cannot claim cgroup subtrees and CPUs in lock_dir {lock.lock_dir}: "
                              f"{e.strerror or e} (set [daemon] lock_dir or --lock-dir to a directory "
                              "root can write, the same for every hwagent on this machine)") from None
        log.info("claimed", lock_dir=lock.lock_dir, subtrees=",".join(claim.subtrees),
                 cpus=str(claim.cpus) or "none")

    def _read_topology(self) -> Topology:
        cfg = self.cfg
        reader = self.topology_reader
        if reader is None:
            from agent.topology.sysfs import read_topology

            def reader(sysfs_root: str, procfs_root: str) -> Topology:
                return read_topology(sysfs_root=sysfs_root, procfs_root=procfs_root)

        try:
            return reader(cfg.sysfs_root, cfg.procfs_root)
        except Exception as e:
            raise DaemonError(f"cannot read topology from {cfg.sysfs_root}: {e}") from e

    async def _start_components(self, ctx: DaemonContext, notifier: Notifier) -> bool:
        """Start in order; False when start-up was abandoned (a failure, or a stop signal)."""
        assert self._stop is not None
        for spec in COMPONENTS if self.components is None else self.components:
            if self._stop.is_set():
                log.info("stop requested during startup", note="not starting the rest")
                return False
            off = off_before_import(spec, ctx.mode, ctx.config)
            if off is not None:
                log.info("component disabled", component=spec, reason=off)
                continue
            factory = load_factory(spec)
            try:
                component = factory(ctx)
            except Exception as e:
                log.exception("component factory failed", component=spec)
                self._failure = f"component {spec}: {type(e).__name__}: {e}"
                raise DaemonError(self._failure) from e
            if component is None:
                log.info("component disabled", component=spec)
                continue
            started = _Started(spec, component)
            notifier.status(f"starting {started.name}")
            t = time.monotonic()
            try:
                await component.start(ctx)
            except Exception as e:
                log.error(
                    "component failed to start", component=started.name, error=f"{type(e).__name__}: {e}",
                    exc_info=log.isEnabledFor(logging.DEBUG),
                )
                # the half-started component may hold resources; it gets a stop() too
                self._started.append(started)
                raise DaemonError(f"component {started.name} failed to start: {e}") from e
            self._started.append(started)
            log.info("component started", component=started.name, seconds=f"{time.monotonic() - t:.3f}")
        ctx.freeze()  # every handle is published: publishing ends here
        return True

    async def _stop_components(self) -> bool:
        """Stop in reverse order, each within stop_timeout_seconds. True when any failed."""
        failed = False
        timeout = self.cfg.stop_timeout_seconds
        while self._started:
            s = self._started.pop()
            try:
                await asyncio.wait_for(s.component.stop(), timeout)
            except asyncio.TimeoutError:
                failed = True
                log.error("component did not stop in time", component=s.name, timeout_seconds=timeout)
            except Exception as e:
                failed = True
                log.error(
                    "component failed to stop", component=s.name, error=f"{type(e).__name__}: {e}", exc_info=True,
                )
            else:
                log.info("component stopped", component=s.name)
        return failed


def _stop_signals() -> tuple[signal.Signals, ...]:
    """The signals that mean "stop cleanly" (SIGHUP is not one: it reloads the config;
    stopping on it left a node without hwagent under Restart=on-failure). Signals
    reach only the main thread; a daemon run in another thread (tests) is stopped
    with request_stop()."""
    if threading.current_thread() is not threading.main_thread():
        return ()
    return (signal.SIGTERM, signal.SIGINT)


async def _watchdog(notifier: Notifier, interval: float) -> None:
    """Ping systemd from the loop itself: a wedged loop stops the pings and systemd restarts us."""
    while True:
        notifier.watchdog()
        await asyncio.sleep(interval)


def _log_topology(topo: Topology) -> None:
    for warning in topo.warnings:
        log.warning("topology", warning=warning)
    log.info(
        "topology read", cpus_online=str(topo.online), cores=len(topo.cores), packages=len(topo.package_ids),
        numa_nodes=len(topo.numa_nodes), isolated=str(topo.isolated) or "none",
    )


def _hostport(address: tuple[str, int] | None) -> str:
    if address is None:
        return "-"
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _sockets_under(root: Path) -> Iterable[Path]:
    """Every socket under ``root`` (symlinks not followed, none yielded). A start and a stop walk the
    whole root dir, thousands of pod records and logs among it: a regular file or a directory is
    told from the directory listing's own type (no stat, no Path made for it) and only what may be
    a socket is looked at (it was an lstat and a Path per file: 0.1 s of a start's CPU per 1,000
    pods, issue 37 item 17)."""
    stack = [os.fspath(root)]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for entry in it:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif not entry.is_file(follow_symlinks=False) and not entry.is_symlink() and \
                            stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                        yield Path(entry.path)
                except OSError:
                    continue


def _remove_paths(paths: Iterable[Path]) -> None:
    for p in paths:
        try:
            p.unlink()
        except FileNotFoundError:
            continue
        except OSError as e:
            log.warning("cannot remove", path=p, error=e.strerror)
        else:
            log.warning("removed a file its component left behind", path=p)


def _report_leftovers(root: Path, before: set[Path]) -> None:
    """Name sockets that appeared under the root during this run and are still there.

    They are reported, not removed: in standalone mode other processes (upstream
    device plugins) legitimately create sockets under device-plugins/.
    """
    if not root.is_dir():
        return
    for p in sorted(set(_sockets_under(root)) - before):
        log.warning("socket left under root dir after stop", path=p)
