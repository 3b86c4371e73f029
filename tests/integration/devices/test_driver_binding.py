"""tests/integration/devices/driver_binding.py: a machine that forbids unbinding is told
apart before anything changes, and the reason it gives is true of the real sysfs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.devices.driver_binding import try_unbind, unbind_refusal


def _driver_dir(tmp_path: Path, *attrs: str) -> Path:
    d = tmp_path / "drivers" / "virtio-pci"
    d.mkdir(parents=True)
    for a in attrs:
        (d / a).write_text("")
    (d / "0000:00:05.0").mkdir()  # the bound device's link, as sysfs lists it
    return d


def test_a_driver_without_bind_attributes_is_refused_with_that_reason(tmp_path: Path) -> None:
    d = _driver_dir(tmp_path)
    why = try_unbind(d, "0000:00:05.0")
    assert why is not None and "no unbind or bind attribute" in why and "virtio-pci" in why


def test_a_driver_with_writable_attributes_is_unbound(tmp_path: Path) -> None:
    d = _driver_dir(tmp_path, "unbind", "bind")
    assert unbind_refusal(d) is None
    assert try_unbind(d, "0000:00:05.0") is None
    assert (d / "unbind").read_text() == "0000:00:05.0"


@pytest.mark.root
def test_the_reason_given_for_the_real_sysfs_holds() -> None:
    """Where a real PCI driver is said to forbid unbinding for want of the attribute,
    writing it is indeed refused (even as root), and nothing is created."""
    drivers = sorted(Path("/sys/bus/pci/drivers").glob("*"))
    refused = [d for d in drivers if (unbind_refusal(d) or "").find("no unbind") >= 0]
    if not refused:
        pytest.skip("every PCI driver here has its bind attributes")
    for d in refused:
        with pytest.raises(OSError):
            (d / "unbind").write_text("0000:ff:1f.7")
        assert not (d / "unbind").exists()
