"""The ``hwagent`` command of a checkout: an entry script that starts the interpreter without ``site``.

pip's console script starts Python the ordinary way: ``site`` runs, reads every
``.pth`` file and installs the editable install's import finder, about 12 ms of
CPU before the first line of hwagent (bench/cli.py: ``python -c pass`` 17-20 ms,
``python -S -c pass`` 6 ms), which is more than Slurm's whole client spends on
``srun`` (and more than lstopo's whole run on most machines). The commands that
only talk to the daemon, and ``topology`` (``LIGHT``), import the standard
library alone (tests/unit/test_cli_imports.py), so this script starts
Python with ``-S``, puts the source directory on ``sys.path`` itself and runs
them without ``site``; every other command (``hwagent run`` needs grpc and
friends from site-packages) loads ``site`` first and behaves as pip's script
does, except that the editable install's ``.pth`` (its finder imports
pathlib, urllib.parse and importlib.util: about 10 ms of CPU, paid before
``hwagent run``'s READY) is skipped: the source directory is already first on
``sys.path``. Should a light command still import a module from the venv's
site-packages, a finder at the end of ``sys.meta_path`` that sees the module
there loads ``site`` then and finds it: slower, never broken. A light command's
process ends with ``os._exit`` once ``main`` returned and its output is flushed:
the interpreter's teardown (every module's objects freed one by one; ~1.5 ms of
a ~10 ms ``launch --wait``, bench/cli.py) does nothing for a client that holds no
resources past its return (no atexit handler, no thread).

``scripts/setup.sh`` writes it over pip's script (``python -m
agent.commands._entry .venv/bin/hwagent``) whenever its text would change.
"""

from __future__ import annotations

import os
import sys

__all__ = ["LIGHT", "script_text", "write"]

#: commands whose client path is the standard library alone
LIGHT: tuple[str, ...] = ("launch", "ps", "describe", "stop", "rm", "admit", "logs", "signal", "exec", "topology",
                          "version", "status", "cpus", "memory", "resources")
#: options that may come before the command's name (agent.cli.GLOBAL_OPTIONS): skipped to find it
GLOBAL: tuple[str, ...] = ("--config", "--root-dir")

_TEMPLATE = '''#!{python} -S
# hwagent, written by scripts/setup.sh from agent/commands/_entry.py (a rerun rewrites it): the
# interpreter starts without site (-S, ~12 ms less CPU); the commands that need site-packages load it.
import sys

sys.path.insert(0, {source!r})
_i = 1
while sys.argv[_i:_i + 1] and sys.argv[_i].partition("=")[0] in {globals!r}:  # `--root-dir X ps`
    _i += 1 if "=" in sys.argv[_i] else 2
_light = sys.argv[_i:_i + 1] and sys.argv[_i] in {light!r}
if _light:
    class _LateSite:
        """A top-level module that is not in the standard library but in the venv: load site, look again."""

        @staticmethod
        def find_spec(name, path=None, target=None):
            from importlib.machinery import PathFinder

            # the venv's own site-packages (without site, sys.prefix is the base interpreter's)
            venv = sys.executable.rpartition("/bin/")[0] + "/lib/python%d.%d/site-packages" % sys.version_info[:2]
            if path is not None or PathFinder.find_spec(name, [venv]) is None:
                return None  # an optional module probed for (ntpath's nt): not found, as without the finder
            import site

            sys.meta_path.remove(_LateSite)
            site.main()
            return PathFinder.find_spec(name, None, target)

    sys.meta_path.append(_LateSite)
else:
    import site

    def _addpackage(sitedir, name, known_paths, _add=site.addpackage):
        """site's own, but the editable install's finder is left out: the source dir is first on sys.path."""
        return known_paths if name.startswith("__editable__") else _add(sitedir, name, known_paths)

    site.addpackage = _addpackage
    site.main()
from agent.cli import main

_rc = main()
if _light:
    # a light command ends without the interpreter's teardown (each module's objects freed one by one,
    # ~1.5 ms of a launch): its output flushed, as that teardown would (status 120 if it cannot be)
    for _f in (sys.stdout, sys.stderr):
        try:
            if _f is not None:
                _f.flush()
        except (OSError, ValueError):
            _rc = _rc or 120
    import os

    os._exit(_rc)
sys.exit(_rc)
'''


def script_text(python: str, source: str) -> str:
    """The entry script for interpreter ``python`` and the checkout whose ``agent`` package is in ``source``."""
    return _TEMPLATE.format(python=python, source=source, light=tuple(sorted(LIGHT)), globals=GLOBAL)


def write(path: str, python: str, source: str) -> bool:
    """Write the script to ``path`` (atomically, mode 0755) unless it already holds that text; True if written."""
    text = script_text(python, source)
    try:
        with open(path) as f:
            if f.read() == text:
                return False
    except OSError:
        pass
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)
    return True


if __name__ == "__main__":  # pragma: no cover - scripts/setup.sh
    target = sys.argv[1]
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    python = os.path.join(os.path.dirname(os.path.abspath(target)), "python")
    if write(target, python, src):
        print(f"wrote {target}")
