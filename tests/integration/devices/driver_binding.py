"""Unbinding a real device from its driver, for tests, on machines that may forbid it.

Why: a test that unbinds a device (to see the kernel's real unbind/bind uevents) cannot
assume the machine lets it. A driver registered with ``suppress_bind_attrs`` has no
``bind``/``unbind`` attribute at all (this project's CI kernel does that for
virtio-pci: writing the missing file is EACCES, even as root), and lockdown or an LSM
may refuse the write. The test must find that out before it changes anything and skip
saying so; where unbinding works it still unbinds for real.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["unbind_refusal", "try_unbind"]

#: errors of a write to ``unbind`` that mean "not allowed here", not "the test is wrong"
_REFUSED = (errno.EACCES, errno.EPERM, errno.EROFS)


def unbind_refusal(driver_dir: Path) -> str | None:
    """Why devices cannot be unbound from (and bound back to) this driver here, or None
    when its ``unbind`` and ``bind`` attributes are there and writable."""
    missing = [name for name in ("unbind", "bind") if not (driver_dir / name).exists()]
    if missing:
        return (f"{driver_dir} has no {' or '.join(missing)} attribute: this kernel does not let devices be "
                f"unbound from {driver_dir.name} (the driver suppresses its bind attributes)")
    unwritable = [name for name in ("unbind", "bind") if not os.access(driver_dir / name, os.W_OK)]
    if unwritable:
        return f"{driver_dir}/{unwritable[0]} is not writable by this process"
    return None


def try_unbind(driver_dir: Path, device: str) -> str | None:
    """Unbind ``device`` from the driver: None when done, else why the machine refused
    (nothing changed then: the device is still bound). Other errors are raised."""
    refusal = unbind_refusal(driver_dir)
    if refusal is not None:
        return refusal
    try:
        (driver_dir / "unbind").write_text(device)
    except OSError as e:
        if e.errno not in _REFUSED or not (driver_dir / device).exists():
            raise
        return f"writing {device} to {driver_dir}/unbind was refused: {e.strerror} (lockdown or an LSM)"
    return None
