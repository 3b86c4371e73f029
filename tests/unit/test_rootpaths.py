"""Every socket under the root dir has a name of its own, and the daemon and the
CLI find each one through agent/rootpaths (one module names every path)."""

from __future__ import annotations

import ast
import argparse
from pathlib import Path

from agent.config import section_defaults
from agent.deviceplugin.component import resolve_paths
from agent.devicemanager.component import host_paths
from agent.status.component import status_socket
from agent.workloads.component import manifest_dir_for, socket_path_for

REPO = Path(__file__).resolve().parents[2]


def test_the_four_sockets_under_the_root_dir_have_four_names(tmp_path):
    cfg = section_defaults()
    host = host_paths(cfg.sections["devicemanager"], tmp_path)
    sockets = {
        "admission": socket_path_for(cfg.sections["workloads"], tmp_path),
        "registration": host.registration_socket,
        "pod-resources": host.pod_resources_socket,
        "status": status_socket(tmp_path),
    }
    assert {k: str(p.relative_to(tmp_path)) for k, p in sockets.items()} == {
        "admission": "admission.sock",
        "registration": "device-plugins/registration.sock",
        "pod-resources": "pod-resources/pod-resources.sock",
        "status": "status.sock",
    }
    assert manifest_dir_for(cfg.sections["workloads"], tmp_path) == tmp_path / "manifests"


def test_built_in_plugins_register_where_the_host_listens(tmp_path):
    cfg = section_defaults()
    _, reg = resolve_paths(cfg, "standalone", tmp_path)
    assert reg == host_paths(cfg.sections["devicemanager"], tmp_path).registration_socket


def test_the_cli_dials_the_cli_socket_the_daemon_binds(tmp_path):
    from agent.commands._admission import socket_path
    from agent.rootpaths import cli_socket

    cfg = section_defaults()
    args = argparse.Namespace(config=None, root_dir=str(tmp_path))
    assert Path(socket_path(args)) == cli_socket(tmp_path) == tmp_path / "cli.sock"
    assert socket_path(args) != socket_path_for(cfg.sections["workloads"], tmp_path)
    # without --root-dir: [daemon] root_dir of --config, read alone, as the full loader reads it
    conf = tmp_path / "hwagent.toml"
    conf.write_text(f'[daemon]\nroot_dir = "{tmp_path / "r"}"\n[cpu]\nenforce_cgroups = false\n')
    from agent.config import load

    args = argparse.Namespace(config=str(conf), root_dir=None)
    assert Path(socket_path(args)) == cli_socket(load(conf).sections["daemon"].root_dir) == tmp_path / "r" / "cli.sock"
    assert Path(socket_path(argparse.Namespace(config=None, root_dir=None))) == \
        cli_socket(section_defaults().sections["daemon"].root_dir)


def test_the_cli_reports_a_config_it_cannot_read_in_one_line(tmp_path):
    import pytest

    from agent.cli import CommandError
    from agent.commands._config import daemon_root

    for text, words in (("[daemon\n", "not valid TOML"), ("[daemon]\nroot_dir = 3\n", "daemon.root_dir")):
        conf = tmp_path / "bad.toml"
        conf.write_text(text)
        with pytest.raises(CommandError, match=words):
            daemon_root(argparse.Namespace(config=str(conf), root_dir=None))
    with pytest.raises(CommandError, match="cannot read config"):
        daemon_root(argparse.Namespace(config=str(tmp_path / "missing.toml"), root_dir=None))


def _string_constants(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)}


#: the daemon's mode probe still spells the kubelet's socket (agent/daemon is being
#: changed by other work; its line moves to rootpaths.kubelet_registration_socket next)
NOT_YET = {"agent/daemon/daemon.py": ["kubelet.sock"]}


def test_only_rootpaths_spells_a_root_dir_socket_name():
    names = {"status.sock", "admission.sock", "registration.sock", "pod-resources.sock", "hwagent.sock",
             "kubelet.sock"}
    spelled = {str(p.relative_to(REPO)): sorted(_string_constants(p) & names)
               for p in sorted((REPO / "agent").rglob("*.py")) if "api" not in p.relative_to(REPO).parts}
    assert {p: n for p, n in spelled.items() if n and p != "agent/rootpaths.py"} == NOT_YET
