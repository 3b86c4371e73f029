"""`hwagent status`, `resources` and `cpus` ask the running daemon over <root>/status.sock."""

from __future__ import annotations

import json

import grpc
import pytest

from agent.cli import main
from agent.status.client import DaemonNotRunning, get_status, get_view

from . import fake_components as fc
from .test_daemon import M, make_daemon, run_daemon

STATUS = "agent.status.component:factory"
HOST = "agent.devicemanager.component:factory"


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_status_answers_from_the_running_daemon(tmp_path, capsys):
    root = str(tmp_path / "root")
    d = make_daemon(tmp_path, (HOST, f"{M}:alpha", STATUS))

    def ask(d):
        fc.HEALTH["alpha"] = False
        code, out, _ = _cli(capsys, "status", "--root-dir", root, "--format", "json")
        doc = json.loads(out)
        text = _cli(capsys, "status", "--root-dir", root)[1]
        res_code, res_out, _ = _cli(capsys, "resources", "--root-dir", root, "--format", "json")
        with pytest.raises(grpc.RpcError) as unknown:
            get_view(root, "nope")
        with pytest.raises(grpc.RpcError) as no_cpu:
            get_view(root, "cpus")
        cpus_code, _cpus_out, cpus_err = _cli(capsys, "cpus", "--root-dir", root)
        return code, doc, text, res_code, json.loads(res_out), unknown.value.code(), no_cpu.value.code(), \
            cpus_code, cpus_err

    exit_code, (code, doc, text, res_code, res, unknown, no_cpu, cpus_code, cpus_err) = run_daemon(d, ask)
    assert exit_code == 0 and code == 0
    assert doc["format"] == "hwagent-status/1" and doc["mode"] == "standalone" and doc["phase"] == "running"
    assert "mode = 'standalone'" in doc["mode_reason"]
    comps = {c["name"]: c["healthy"] for c in doc["components"]}
    assert comps == {"devicemanager": True, "alpha": False, "status": True}
    assert doc["pods"] == [] and doc["evictions"] == []
    assert "alpha" in text and "UNHEALTHY" in text and "mode: standalone" in text
    assert res_code == 0 and res["source_kind"] == "live" and res["source"] == "device-plugin host (live)"
    assert unknown == grpc.StatusCode.INVALID_ARGUMENT and no_cpu == grpc.StatusCode.FAILED_PRECONDITION
    # no CPU policy in this daemon: cpus falls back to the checkpoint, and says there is none
    assert cpus_code != 0 and "no cpu checkpoint" in cpus_err

    # stopped: status says so, resources reads the checkpoint and says which
    with pytest.raises(DaemonNotRunning):
        get_status(root)
    code, _out, err = _cli(capsys, "status", "--root-dir", root)
    assert code != 0 and "not running" in err
    code, out, _ = _cli(capsys, "resources", "--root-dir", root, "--format", "json")
    assert code == 0 and json.loads(out)["source_kind"] == "checkpoint"
    assert _cli(capsys, "resources", "--root-dir", root)[1].startswith("checkpoint ")


def test_resources_without_daemon_or_checkpoint_says_both(tmp_path, capsys):
    code, _out, err = _cli(capsys, "resources", "--root-dir", str(tmp_path))
    assert code != 0 and "no running daemon" in err and "no device-manager checkpoint" in err
