"""Hostile names and planted links under the root dir: refused or handled, never followed outside.

Names: pod names at and past the on-disk limits (253 admissible, 254 and 255
refused by admission), dot names, odd bytes, and long names that differ only
after the point where an on-disk name must be cut. Each either is refused by
admission or gets a log directory that the kernel accepts, that ``hwagent logs``
finds again, and that no other name in the set shares.

Links: a symbolic link to a directory outside the root (holding a sentinel
file) is planted in turn at every directory and file hwagent creates or reads
under its root dir, then the code that makes or reads that place runs. Each
case counts as refused (an error naming the link) or handled (the place is
treated as absent or bad, or the link itself is replaced); in no case may
anything outside change or be read back. Counts go to ``COUNTS``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.cli import CommandError
from agent.commands.logs import log_file
from agent.contracts import DaemonContext
from agent.daemon.daemon import ROOT_LAYOUT, DaemonError, prepare_root
from agent.diskname import NAME_MAX
from agent.runtime.component import prepare_dirs
from agent.runtime.logdir import prepare_log_file
from agent.runtime.state import PodFiles, PodRecord
from agent.workloads.manifest import ManifestError, parse_manifest
from agent.workloads.manifestdir import ManifestDir
from agent.workloads.store import PodFileStore, RegistryStateError
from tests.fault.conftest import COUNTS
from tests.unit.workloads.test_manifestdir import MANIFEST, _Workloads

#: 240 bytes of a valid DNS subdomain: with "default_" and 8 bytes more a name passes 255 and is cut
#: (to 238 bytes, then the hash), so the tails below differ only after the cut
_CUT = ".".join(["c" * 63] * 3) + "." + "c" * 48
_TAILS = ("aaaaaaaa", "aaaaaaab", "baaaaaaa", "aaaa.aaaa", "aaaaa.aaa", "1" * 13, "1" * 12, "-xxxxxxxx", "xxxxxxxx-")


def _hostile_names() -> list[str]:
    label = "x" * 63
    n253 = ".".join([label, label, label, "y" * 61])
    names = [n253, n253 + "z", n253 + "zz", "..", ".", "...", "-", ".hidden", "a b", "a\nb", "a\x01b", "a\x7fb",
             "\xff", "é" * 126, "%41", "~abc", "a%2Fb", "a_b", "nul\0byte"]
    names += [_CUT + tail for tail in _TAILS]
    return names


def _admission(name: str) -> bool:
    text = json.dumps({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "command": ["/bin/true"]}]}})
    try:
        parse_manifest(text)
    except (ManifestError, ValueError):
        return False
    return True


def test_hostile_pod_names_get_log_dirs_that_fit_and_never_collide(tmp_path):
    names = _hostile_names()
    admitted = refused = 0
    dirs: dict[str, str] = {}
    for name in names:
        if _admission(name):
            admitted += 1
        else:
            refused += 1
        # the runtime's path is taken whatever admission said: it must hold for any string
        path = prepare_log_file(tmp_path, "default", name, "main")
        d = path.parent
        assert d.parent == tmp_path / "logs", name
        assert len(os.fsencode(d.name)) <= NAME_MAX and d.name not in (".", ".."), name
        assert d.name not in dirs, f"{name!r} and {dirs.get(d.name)!r} share {d.name}"
        dirs[d.name] = name
        path.write_text(f"{len(name)}\n")
        assert log_file(tmp_path, "default", name, None) == path  # hwagent logs finds it again
    assert sorted(os.listdir(tmp_path / "logs")) == sorted(dirs)
    assert _admission(names[0]) and not _admission(names[1]) and not _admission(names[2])  # 253 in; 254, 255 out
    assert sum(_admission(_CUT + t) for t in _TAILS) == len(_TAILS) - 1  # all but the one ending in "-"
    COUNTS["hostile names: names tried"] += len(names)
    COUNTS["hostile names: refused by admission"] += refused
    COUNTS["hostile names: admitted"] += admitted
    COUNTS["hostile names: distinct log dirs"] += len(dirs)


# --- planted links --------------------------------------------------------------------------------

def _run_manifest_start(root: Path) -> None:
    asyncio.run(ManifestDir(root / "manifests", _Workloads(), root_dir=root).start())  # type: ignore[arg-type]


def _run_manifest_sync(root: Path) -> str:
    (root / "manifests").mkdir(exist_ok=True)
    w = _Workloads()
    md = ManifestDir(root / "manifests", w, root_dir=root)  # type: ignore[arg-type]
    asyncio.run(md.sync_once())
    assert w.admitted == []
    return " ".join(e for _p, e in md.errors())


def _store_load_bad(root: Path) -> None:
    PodFileStore(root / "workloads" / "pods", root_dir=root).load()


def _pod_load(root: Path) -> str:
    assert PodFiles(root / "runtime", "u1").load() is None  # as if absent: the runtime re-derives
    return "symbolic link: treated as absent"


def _log_cli(root: Path) -> None:
    log_file(root, "default", "web", None)


#: (where the link is planted, whether it points at a file, what hwagent does there)
CASES: list[tuple[str, bool, Callable[[Path], object]]] = [
    ("logs", False, lambda r: prepare_log_file(r, "default", "web", "main")),
    ("logs/default_web", False, lambda r: prepare_log_file(r, "default", "web", "main")),
    ("logs/default_web/main.log", True, lambda r: prepare_log_file(r, "default", "web", "main")),
    ("logs/default_web", False, _log_cli),
    ("logs/default_web/main.log", True, _log_cli),
    ("logs", False, prepare_dirs),
    ("runtime", False, prepare_dirs),
    ("runtime", False, lambda r: PodFiles(r / "runtime", "u1").write(PodFiles.encode(PodRecord("u1", "d/a")))),
    ("runtime/u1", False, lambda r: PodFiles(r / "runtime", "u1").write(PodFiles.encode(PodRecord("u1", "d/a")))),
    ("runtime/u1", False, lambda r: PodFiles(r / "runtime", "u1").container("main").prepare()),
    ("runtime/u1/main", False, lambda r: PodFiles(r / "runtime", "u1").container("main").prepare()),
    ("runtime/u1", False, _pod_load),
    ("runtime/u1/pod.json", True, _pod_load),
    ("workloads", False, lambda r: PodFileStore(r / "workloads" / "pods", root_dir=r).load()),
    ("workloads/pods", False, lambda r: PodFileStore(r / "workloads" / "pods", root_dir=r).load()),
    ("workloads/pods/u1.json", True, _store_load_bad),
    ("manifests", False, _run_manifest_start),
    ("manifests/pod.yaml", True, _run_manifest_sync),
    *((d, False, prepare_root) for d in ROOT_LAYOUT),
    ("pressure", False, lambda r: DaemonContext(config=None, root_dir=r, topology=None).path(  # type: ignore[arg-type]
        "pressure", "evictions.jsonl")),
]


def _snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("where,to_file,action", CASES, ids=[f"{w}-{i}" for i, (w, _f, _a) in enumerate(CASES)])
def test_a_link_planted_under_the_root_dir_is_never_followed(tmp_path, where, to_file, action):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = MANIFEST.replace("NAME", "stolen-x9q")  # valid as a manifest: reading it would admit a pod
    (outside / "sentinel.yaml").write_text(secret)
    (outside / "pods").mkdir()
    (outside / "u1.json").write_text("{}")
    before = _snapshot(outside)
    root = tmp_path / "root"
    (root / where).parent.mkdir(parents=True, exist_ok=True)
    (root / where).symlink_to(outside / "sentinel.yaml" if to_file else outside)
    try:
        result = action(root)
    except (OSError, DaemonError, CommandError, RegistryStateError, RuntimeError) as e:
        text = str(e)
        assert "symbolic link" in text or "not a regular file" in text, text
        outcome = "refused"
    else:
        text = str(result)
        outcome = "handled"
        if to_file and where.endswith((".log", ".json")):
            assert not (root / where).is_symlink() or "absent" in text  # replaced, or treated as absent
        else:
            assert "symbolic link" in text or "not a regular file" in text, (where, text)
    assert _snapshot(outside) == before, f"{where}: something outside changed"
    assert "stolen-x9q" not in text  # nothing read through the link comes back
    COUNTS["planted links: cases"] += 1
    COUNTS[f"planted links: {outcome}"] += 1
