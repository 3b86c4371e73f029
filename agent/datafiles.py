"""Where hwagent's non-Python files are: in a checkout, or installed from the wheel.

The probes' C sources, the systemd unit and the docs live at the top of the
repository (the layout is fixed by the design), not inside the ``agent``
package. A wheel carries them as data files under ``<prefix>/share/hwagent``
(see ``[tool.setuptools.data-files]`` in pyproject.toml), so one lookup serves
both: the checkout beside the package first (a developer's edits win), then the
installed copy under the interpreter's prefix.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["checkout_root", "share_dir", "data_path", "probes_dir", "unit_template", "docs_dir"]

#: where the wheel's data files land, relative to the installation prefix
SHARE = Path("share") / "hwagent"


def checkout_root() -> Path | None:
    """The repository root when the package is imported from a checkout."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() and (root / "probes").is_dir() else None


def share_dir() -> Path:
    """``<prefix>/share/hwagent`` of the running interpreter (venv or system)."""
    return Path(sys.prefix) / SHARE


def data_path(relative: str) -> Path:
    """A data file or directory by its path in the repository (e.g. ``probes``).

    Returns the checkout's copy, else the installed one; the installed path is
    returned even when missing, so the caller's error names where it looked.
    """
    root = checkout_root()
    if root is not None and (root / relative).exists():
        return root / relative
    return share_dir() / relative


def probes_dir() -> Path:
    """The BPF C sources: $HWAGENT_PROBES_DIR, the checkout's probes/, or the installed copy."""
    env = os.environ.get("HWAGENT_PROBES_DIR")
    return Path(env) if env else data_path("probes")


def unit_template() -> Path:
    return data_path("systemd/hwagent.service")


def docs_dir() -> Path:
    return data_path("docs")
