"""The health board: per-source marks, resolution by kind/key, change pushes."""

from __future__ import annotations

from prometheus_client import REGISTRY

from agent.deviceplugin.health import HealthBoard


def _board():
    pushes: list[set[str]] = []
    table = {("block", "7:3"): [("a.io/loop", "loop3")], ("block", "loop3"): [("a.io/loop", "loop3")],
             ("pci", "0000:5e:00.0"): [("a.io/nvme", "0000:5e:00.0")]}
    return HealthBoard(lambda k, key: table.get((k, key), []), pushes.append), pushes


def _count(resource, health):
    return REGISTRY.get_sample_value("hwagent_builtin_plugin_health_changes_total",
                                     {"resource": resource, "health": health}) or 0.0


def test_marks_are_per_source_and_push_only_on_change():
    b, pushes = _board()
    before = _count("a.io/loop", "Unhealthy")
    assert b.set_health_for("block", "7:3", False, "io stall", "blkprobe") == ["loop3"]
    assert b.health_of("loop3") == (False, "blkprobe: io stall")
    assert pushes == [{"a.io/loop"}]
    assert _count("a.io/loop", "Unhealthy") == before + 1
    # a second source: still unhealthy, reasons combined, no push (no change)
    b.set_health_for("block", "loop3", False, "errors", "psi")
    assert b.health_of("loop3") == (False, "blkprobe: io stall; psi: errors") and len(pushes) == 1
    b.set_health_for("block", "loop3", True, "ok", "blkprobe")
    assert b.health_of("loop3")[0] is False and len(pushes) == 1
    b.set_health_for("block", "loop3", True, "ok", "psi")
    assert b.health_of("loop3") == (True, "") and pushes[-1] == {"a.io/loop"} and len(pushes) == 2


def test_unknown_key_affects_nothing():
    b, pushes = _board()
    assert b.set_health_for("net", "eth9", False, "down", "probe") == []
    assert pushes == []


def test_forget_drops_marks_of_gone_devices():
    b, _ = _board()
    b.set_health_for("pci", "0000:5e:00.0", False, "aer", "probe")
    b.forget(["loop3"])
    assert b.health_of("0000:5e:00.0") == (True, "")
