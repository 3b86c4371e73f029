"""Strict TOML config: every mistake is refused with a message that names the key."""

from __future__ import annotations

import dataclasses
import logging
from typing import Literal

import pytest

from agent import config as config_mod
from agent.config import Config, ConfigError, dumps, load, loads, section_defaults
from agent.daemonconfig import DaemonConfig


def test_no_file_is_the_embedded_defaults():
    cfg = load(None)
    assert cfg.sections["daemon"] == DaemonConfig()
    assert cfg.path is None


def test_empty_file_is_the_defaults(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("")
    assert load(p).sections == section_defaults().sections


def test_values_are_read(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[daemon]\nroot_dir = "/srv/hw"\nmode = "standalone"\nstop_timeout_seconds = 3\n')
    d = load(p).sections["daemon"]
    assert d.root_dir == "/srv/hw"
    assert d.mode == "standalone"
    # TOML integers are accepted where a float is expected, and become floats
    assert d.stop_timeout_seconds == 3.0 and isinstance(d.stop_timeout_seconds, float)
    assert d.metrics_address == "127.0.0.1:9464"  # untouched keys keep defaults


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[deamon]\n", "unknown section [deamon] (did you mean 'daemon'?"),
        ("[daemon]\nrootdir = '/x'\n", "daemon.rootdir: unknown key (did you mean 'root_dir'?"),
        ("[daemon]\nbogus = 1\n", "daemon.bogus: unknown key (known: kubelet_root_dir, "),
        ("[daemon]\nroot_dir = 5\n", "daemon.root_dir: expected a string, got an integer"),
        ("[daemon]\nstop_timeout_seconds = 'ten'\n", "daemon.stop_timeout_seconds: expected a number, got a string"),
        ("[daemon]\nstop_timeout_seconds = true\n", "daemon.stop_timeout_seconds: expected a number, got a boolean"),
        ("[daemon]\nmode = 'both'\n", "daemon.mode: must be one of \"auto\", \"standalone\", \"kubelet\", got \"both\""),
        ("[daemon]\nlog_level = 1\n", "daemon.log_level: must be one of"),
        ("[daemon]\nmetrics_address = '9464'\n", "daemon.metrics_address: must be HOST:PORT, got '9464'"),
        ("[daemon]\nmetrics_address = 'localhost:99999'\n", "daemon.metrics_address: port must be 0-65535"),
        ("[daemon]\nroot_dir = 'var/lib/hw'\n", "daemon.root_dir: must be an absolute path"),
        ("[daemon]\nstop_timeout_seconds = 0\n", "daemon.stop_timeout_seconds: must be in (0, 3600]"),
        ("[daemon]\nroot_dir = '/'\n", "daemon.root_dir: must be a directory of its own, not /"),
        ("[daemon]\nstop_timeout_seconds = nan\n", "daemon.stop_timeout_seconds: expected a number, got nan"),
        ("daemon = 3\n", "daemon must be a table ([daemon]), got an integer"),
        ("[daemon\n", "not valid TOML"),
    ],
)
def test_errors_name_the_file_and_key(tmp_path, text, expected):
    p = tmp_path / "hw.toml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}: "), msg
    assert expected in msg, msg
    assert "\n" not in msg  # one line for the operator


def test_unreadable_and_binary_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config .*No such file"):
        load(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="cannot read config .*Is a directory"):
        load(tmp_path)
    p = tmp_path / "bin.toml"
    p.write_bytes(b"[daemon]\nroot_dir = '\xff\xfe'\n")
    with pytest.raises(ConfigError, match="not valid TOML: not UTF-8"):
        load(p)


def test_replace_checks_like_the_file():
    cfg = load(None)
    new = cfg.replace("daemon", root_dir="/srv/x", log_level="debug")
    assert new.sections["daemon"].root_dir == "/srv/x" and new.sections["daemon"].log_level == "debug"
    assert cfg.sections["daemon"].root_dir == "/var/lib/hwagent"  # the original is untouched
    with pytest.raises(ConfigError, match=r"^daemon\.metrics_address: must be HOST:PORT"):
        cfg.replace("daemon", metrics_address="nope")
    with pytest.raises(ConfigError, match=r"^daemon\.log_level: must be one of"):
        cfg.replace("daemon", log_level="loud")
    with pytest.raises(ConfigError, match=r"^daemon\.rootdir: unknown key"):
        cfg.replace("daemon", rootdir="/x")
    with pytest.raises(ConfigError, match=r"unknown section \[nope\]"):
        cfg.replace("nope", x=1)


@dataclasses.dataclass(frozen=True)
class _Inner:
    depth: int = 1


@dataclasses.dataclass(frozen=True)
class _Demo:
    """A section exercising the type checker beyond what [daemon] uses."""

    names: tuple[str, ...] = ("a",)
    pair: tuple[int, str] = (1, "x")
    weights: dict[str, float] = dataclasses.field(default_factory=dict)
    inner: _Inner = _Inner()
    level: Literal[1, 2] = 1
    limit: int | None = None
    flag: bool = False


@pytest.fixture
def demo_section(monkeypatch):
    import sys
    import types

    mod = types.ModuleType("_hwagent_demo_section")
    mod._Demo = _Demo
    monkeypatch.setitem(sys.modules, "_hwagent_demo_section", mod)
    monkeypatch.setitem(config_mod.SECTIONS, "demo", "_hwagent_demo_section:_Demo")


def test_nested_and_container_types(demo_section):
    cfg = loads(
        "[demo]\nnames = ['x', 'y']\npair = [2, 'b']\nlimit = 5\nflag = true\nlevel = 2\n"
        "[demo.weights]\nfast = 1\nslow = 0.5\n[demo.inner]\ndepth = 3\n"
    )
    d = cfg.sections["demo"]
    assert d.names == ("x", "y") and d.pair == (2, "b") and d.limit == 5 and d.flag is True
    assert d.weights == {"fast": 1.0, "slow": 0.5}
    assert d.inner == _Inner(3)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[demo]\nnames = 'x'\n", "demo.names: expected a list, got a string"),
        ("[demo]\nnames = ['x', 2]\n", "demo.names[1]: expected a string, got an integer"),
        ("[demo]\npair = [1]\n", "demo.pair: expected a list of 2 items, got 1"),
        ("[demo]\nlimit = 'many'\n", "demo.limit: expected an integer, got a string"),
        ("[demo]\nflag = 1\n", "demo.flag: expected true or false, got 1"),
        # True == 1 in Python; the config must not accept a boolean for Literal[1, 2]
        ("[demo]\nlevel = true\n", "demo.level: must be one of 1, 2, got true"),
        ("[demo.inner]\ndepht = 2\n", "demo.inner.depht: unknown key (did you mean 'depth'?"),
        ("[demo.weights]\nfast = 'x'\n", "demo.weights.fast: expected a number, got a string"),
    ],
)
def test_container_type_errors(demo_section, text, expected):
    with pytest.raises(ConfigError) as e:
        loads(text)
    assert expected in str(e.value)


def test_dumps_reads_back_equal(demo_section):
    cfg = loads(
        "[daemon]\nroot_dir = '/srv/\"q\"'\nstop_timeout_seconds = 2.5\n"
        "[demo]\nnames = ['x', 'ü']\n[demo.weights]\na = 1.5\n"
    )
    text = dumps(cfg)
    assert "# limit is unset" in text
    assert loads(text).sections == cfg.sections


def test_print_config_of_defaults_round_trips():
    cfg = section_defaults()
    assert loads(dumps(cfg)).sections == cfg.sections
    assert isinstance(cfg, Config)


@dataclasses.dataclass(frozen=True)
class _Rule:
    name: str = ""
    env: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class _Rules:
    rules: tuple[_Rule, ...] = ()


def test_array_of_tables_round_trips(monkeypatch):
    import sys
    import types

    mod = types.ModuleType("_hwagent_rules_section")
    mod._Rules = _Rules
    monkeypatch.setitem(sys.modules, "_hwagent_rules_section", mod)
    monkeypatch.setitem(config_mod.SECTIONS, "rules", "_hwagent_rules_section:_Rules")
    cfg = loads('[[rules.rules]]\nname = "a"\nenv = { X = "1", "with.dot" = "2" }\n[[rules.rules]]\nname = "b"\n')
    assert cfg.sections["rules"].rules == (_Rule("a", {"X": "1", "with.dot": "2"}), _Rule("b"))
    assert loads(dumps(cfg)).sections == cfg.sections
    with pytest.raises(ConfigError, match=r"rules\.rules\[1\]\.nmae: unknown key"):
        loads('[[rules.rules]]\nname = "a"\n[[rules.rules]]\nnmae = "b"\n')


def test_an_obsolete_key_loads_with_one_warning_saying_it_is_ignored(caplog):
    with caplog.at_level(logging.WARNING, logger="hwagent.config"):
        cfg = loads("[pressure]\nmax_tasks = 1024\nmax_cgroups = 512\n")
    assert cfg.sections["pressure"].max_cgroups == 512
    assert not hasattr(cfg.sections["pressure"], "max_tasks")
    (warning,) = [r for r in caplog.records if r.name == "hwagent.config"]
    assert warning.getMessage() == "config key ignored"
    assert warning.fields["key"] == "pressure.max_tasks" and "task-local storage" in warning.fields["why"]


def test_an_unknown_key_is_still_refused():
    with pytest.raises(ConfigError, match="max_taskz"):
        loads("[pressure]\nmax_taskz = 1024\n")


# --- typed section keys ------------------------------------------------------------------------


def test_a_section_is_looked_up_by_its_typed_key():
    from agent.cpu.config import CPU_SECTION, CPUConfig
    from agent.daemonconfig import DAEMON_SECTION

    cfg = load(None).replace("cpu", reserved_cpus=3)
    assert cfg[DAEMON_SECTION] == DaemonConfig()
    assert isinstance(cfg[CPU_SECTION], CPUConfig) and cfg[CPU_SECTION].reserved_cpus == 3
    with pytest.raises(TypeError, match=r"config\['cpu'\]: look a section up by its key .*CPU_SECTION"):
        cfg["cpu"]  # type: ignore[index]


def test_every_section_has_a_key_beside_its_class():
    """The registry names each section's class lazily ("module:Class", so start-up imports
    nothing it does not use); the key next to the class must agree with it."""
    import importlib

    from agent.config import SectionKey

    for name, target in config_mod.SECTIONS.items():
        module, _, cls_name = target.partition(":")
        mod = importlib.import_module(module)
        keys = [k for k in vars(mod).values() if isinstance(k, SectionKey)]
        assert [(k.name, k.cls) for k in keys] == [(name, getattr(mod, cls_name))], target


def test_a_key_of_another_class_is_refused():
    from agent.config import SectionKey

    wrong = SectionKey("daemon", _Demo)
    with pytest.raises(TypeError, match=r"\[daemon\] is a DaemonConfig, not the _Demo"):
        load(None)[wrong]


_SECTION_WRONG = '''
from agent.config import Config
from agent.cpu.config import CPU_SECTION
from agent.daemonconfig import DaemonConfig


def reader(cfg: Config) -> None:
    d: DaemonConfig = cfg[CPU_SECTION]
    cfg["cpu"]
    cfg[CPU_SECTION].no_such_field
'''

_SECTION_RIGHT = '''
from agent.config import Config
from agent.cpu.config import CPU_SECTION, CPUConfig


def reader(cfg: Config) -> int:
    c: CPUConfig = cfg[CPU_SECTION]
    return c.reserved_cpus + cfg[CPU_SECTION].reserved_cpus
'''


def test_mypy_sees_each_sections_type(tmp_path):
    from tests.unit.daemon.test_contracts import _mypy

    wrong = _mypy(tmp_path, "wrong_section.py", _SECTION_WRONG)
    lines = [line for line in wrong.stdout.splitlines() if "wrong_section.py" in line and ": error:" in line]
    assert any(":8: error: Incompatible types in assignment" in line and "CPUConfig" in line for line in lines), lines
    assert any(":9: error:" in line for line in lines), lines
    assert any(":10: error:" in line and "no_such_field" in line for line in lines), lines
    right = _mypy(tmp_path, "right_section.py", _SECTION_RIGHT)
    assert right.returncode == 0, right.stdout + right.stderr
