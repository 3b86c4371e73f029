"""The typed context components share: publish/lookup by HandleKey, deferred
references for producers that start later, frozen once every component started;
and the import graph that keeps components talking through agent.contracts only."""

from __future__ import annotations

import ast
import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.config import section_defaults
from agent.contracts import ACTIVE_PODS, RUNTIME, HandleKey
from agent.contracts import DaemonContext
from agent.pods import StaticActivePods
from agent.topology.model import synthetic
from tests.unit.daemon import fake_components as fc
from tests.unit.daemon.test_daemon import make_daemon, run_daemon

REPO = Path(__file__).resolve().parents[3]
AGENT = REPO / "agent"


def _ctx(tmp_path: Path) -> DaemonContext:
    return DaemonContext(section_defaults(), tmp_path / "root", synthetic())


def test_publish_lookup_withdraw(tmp_path):
    ctx = _ctx(tmp_path)
    pods = StaticActivePods({"a"})
    assert ctx.lookup(ACTIVE_PODS) is None
    ctx.publish(ACTIVE_PODS, pods)
    assert ctx.lookup(ACTIVE_PODS) is pods
    with pytest.raises(RuntimeError, match="'active_pods' published twice"):
        ctx.publish(ACTIVE_PODS, StaticActivePods())
    assert ctx.lookup(ACTIVE_PODS) is pods  # the refused publish changed nothing
    ctx.withdraw(ACTIVE_PODS)
    assert ctx.lookup(ACTIVE_PODS) is None
    ctx.withdraw(ACTIVE_PODS)  # idempotent: a stop after a failed start


def test_publish_after_freeze_raises_and_changes_nothing(tmp_path):
    ctx = _ctx(tmp_path)
    ctx.publish(ACTIVE_PODS, StaticActivePods())
    assert not ctx.frozen
    ctx.freeze()
    assert ctx.frozen
    with pytest.raises(RuntimeError, match="'runtime' published after start: the context is frozen"):
        ctx.publish(RUNTIME, object())  # type: ignore[arg-type]
    assert ctx.lookup(RUNTIME) is None
    # a stopping component still takes its handle back
    ctx.withdraw(ACTIVE_PODS)
    assert ctx.lookup(ACTIVE_PODS) is None


def test_deferred_reference_resolves_when_its_producer_publishes(tmp_path):
    """The consumer (started first) holds the reference; it answers None until the
    producer published (which, in the daemon, happens before freeze), the handle
    after, None again once withdrawn."""
    ctx = _ctx(tmp_path)
    ref = ctx.deferred(ACTIVE_PODS)
    assert ref() is None  # before freeze, before the producer started
    pods = StaticActivePods({"p"})
    ctx.publish(ACTIVE_PODS, pods)
    ctx.freeze()
    assert ref() is pods
    assert ref().active_pod_uids() == frozenset({"p"})
    ctx.withdraw(ACTIVE_PODS)
    assert ref() is None


def test_services_dict_is_gone_from_the_public_surface(tmp_path):
    ctx = _ctx(tmp_path)
    assert not hasattr(ctx, "services")
    public_fields = {f.name for f in dataclasses.fields(DaemonContext) if f.init}
    assert "services" not in public_fields and not any(f.startswith("_") for f in public_fields)
    with pytest.raises(TypeError):
        DaemonContext(section_defaults(), tmp_path, synthetic(), services={})  # type: ignore[call-arg]


def test_the_daemon_freezes_the_context_once_every_component_started(tmp_path):
    fc.OBSERVED.clear()
    d = make_daemon(tmp_path, ("tests.unit.daemon.fake_components:alpha",
                               "tests.unit.daemon.fake_components:observer",
                               "tests.unit.daemon.fake_components:beta"))

    def check(daemon):
        ctx, frozen_at_factory = fc.OBSERVED[-1]
        try:
            ctx.publish(HandleKey("late"), object())
        except RuntimeError as e:
            refused = str(e)
        else:
            refused = ""
        return frozen_at_factory, ctx.frozen, ctx.lookup(HandleKey("beta")) is not None, refused

    rc, (frozen_at_factory, frozen_running, beta_published, refused) = run_daemon(d, check)
    assert rc == 0
    assert frozen_at_factory is False and frozen_running is True and beta_published
    assert refused == "'late' published after start: the context is frozen"


# --- mypy: a key of the wrong contract is a type error ---------------------------------------

_WRONG = '''
from agent.contracts import CPU_POLICY, WORKLOADS, DeviceAllocations
from agent.contracts import DaemonContext


def consumer(ctx: DaemonContext) -> None:
    devices: DeviceAllocations | None = ctx.lookup(CPU_POLICY)
    ctx.publish(WORKLOADS, "not a registry")
'''

_RIGHT = '''
from agent.contracts import CPU_POLICY, CPUAllocations
from agent.contracts import DaemonContext


def consumer(ctx: DaemonContext) -> None:
    cpu: CPUAllocations | None = ctx.lookup(CPU_POLICY)
    later = ctx.deferred(CPU_POLICY)
    again: CPUAllocations | None = later()
'''


def _mypy(tmp_path: Path, name: str, text: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("mypy")
    if not exe.exists() and shutil.which("mypy") is None:
        pytest.skip("mypy is not installed (the test extras bring it)")
    snippet = tmp_path / name
    snippet.write_text(text)
    # the package's own findings are the gate's business: only the snippet's errors count here
    cmd = [str(exe) if exe.exists() else "mypy", "--config-file", str(REPO / "pyproject.toml"),
           "--follow-imports", "silent", "--cache-dir", str(REPO / ".mypy_cache"), str(snippet)]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_mypy_refuses_a_lookup_or_publish_of_the_wrong_contract(tmp_path):
    wrong = _mypy(tmp_path, "wrong_key.py", _WRONG)
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    lines = [line for line in wrong.stdout.splitlines() if "wrong_key.py" in line and ": error:" in line]
    assert any(":7: error: Incompatible types in assignment" in line and "CPUAllocator" in line for line in lines), lines
    assert any(":8: error:" in line and "publish" in line for line in lines), lines
    right = _mypy(tmp_path, "right_key.py", _RIGHT)
    assert right.returncode == 0, right.stdout + right.stderr


# --- the import graph -------------------------------------------------------------------------

#: packages whose modules run inside a component (commands and the daemon are not: the
#: CLI builds cores directly, and the daemon names factories by string)
COMPONENT_PACKAGES = {"cpu", "devicemanager", "deviceplugin", "kubelet", "pressure", "runtime", "status",
                      "workloads", "podresources", "topologymanager"}
#: the classes behind each published handle, by owning package: nobody else imports them
PRODUCERS = {
    "cpu": {"CPUPolicyComponent", "DurablePolicy", "DynamicPolicy"},
    "devicemanager": {"DeviceManagerComponent", "DeviceManager"},
    "deviceplugin": {"DevicePluginsComponent", "HealthBoard"},
    "kubelet": {"PodDirectoryComponent", "KubeletPodDirectorySource", "EvictionPluginComponent"},
    "pressure": {"PressureComponent", "PressureEngine"},
    "runtime": {"RuntimeComponent", "WorkloadRuntime"},
    "workloads": {"WorkloadsComponent", "Workloads"},
    "status": {"StatusComponent"},
}


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "agent" else None


def _imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name or None) of every import in the file, nested ones included."""
    out: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(node.lineno, node.module, a.name) for a in node.names]
    return out


def cross_component_imports(root: Path) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        own = rel.parts[1] if len(rel.parts) > 2 else None
        if own not in COMPONENT_PACKAGES:
            continue
        for line, module, name in sorted(_imports(path)):
            other = _package(module)
            if other is None or other == own or other not in COMPONENT_PACKAGES:
                continue
            if module == f"agent.{other}.component" or module.startswith(f"agent.{other}.component."):
                bad.append(f"{rel}:{line} imports {module}")
            elif name in PRODUCERS.get(other, ()):
                bad.append(f"{rel}:{line} imports {module}.{name}")
    return bad


def test_no_component_imports_another_components_class():
    """Components meet in agent.contracts: a consumer names the Protocol, never the
    producer's class (e.g. agent.podresources must not import agent.cpu.component)."""
    assert cross_component_imports(AGENT) == []


def test_the_import_graph_check_finds_a_cross_component_import(tmp_path):
    fake = tmp_path / "agent"
    (fake / "podresources").mkdir(parents=True)
    (fake / "podresources" / "server.py").write_text(
        "from agent.contracts import CPUAllocations\n"
        "def f():\n    from agent.cpu.component import CPUPolicyComponent\n"
        "from agent.devicemanager.manager import DeviceManager\n")
    assert cross_component_imports(fake) == [
        "agent/podresources/server.py:3 imports agent.cpu.component",
        "agent/podresources/server.py:4 imports agent.devicemanager.manager.DeviceManager",
    ]
