"""Static pods: a directory of manifests, kept admitted like the kubelet's staticPodPath.

A file added is admitted, a file removed is removed, a file changed is
replaced (the old pod removed, the new one admitted). A bad file (unreadable,
invalid, refused) is reported (log, ``hwagent_workloads_manifest_file_errors``,
``hwagent ps``) and never stops the daemon; a refused file is retried with a
back-off (10 s doubling to 5 min) since what it asks for may appear (a
device plugin registering late). Polling compares (mtime, size) first and the
content's SHA-256 only when those moved, so an idle directory costs one
``scandir`` per period. Files: ``*.yaml``, ``*.yml``, ``*.json``; dot-files are
skipped (editors' swap files, partial copies).

Only regular files are read: each is opened relative to the directory with
``O_NOFOLLOW`` (and ``O_NONBLOCK``, so a FIFO cannot hang a pass), and a
symbolic link or anything else is reported as a bad file, never followed (a
link once made hwagent read ``/etc/passwd``). The directory itself, when it is
the default under the root dir, is made and entered through ``agent.safepath``
(0700, no link followed); one the operator configured elsewhere is theirs.

The pod's UID is derived from the path and the content when the manifest has
none (a UUID-shaped hash, as the kubelet derives static pods' UIDs from theirs), and the content digest is kept in the registry (``PodSpec.source_digest``),
so after a restart an unchanged file is recognised as already admitted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import hashlib
import os
import stat
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.eventlog import get_logger
from agent.safepath import ensure_dir, open_dir
from agent.tasks import cancel_and_wait
from agent.workloads import metrics as m
from agent.workloads.admission import Workloads
from agent.workloads.errors import AdmissionError
from agent.workloads.manifest import MAX_MANIFEST_BYTES, ManifestError, parse_manifest

__all__ = ["ManifestDir", "SUFFIXES", "source_of"]

log = get_logger("hwagent.workloads")

SUFFIXES = (".yaml", ".yml", ".json")
DIR_MODE = 0o700
RETRY_FIRST_S = 10.0
RETRY_MAX_S = 300.0
#: codes worth retrying: the node may change, the file does not
_RETRY_CODES = frozenset({"RESOURCE_EXHAUSTED", "UNAVAILABLE", "ABORTED", "DEADLINE_EXCEEDED", "FAILED_PRECONDITION",
                          "INTERNAL", "ALREADY_EXISTS"})


def source_of(path: Path) -> str:
    return f"file:{path}"


@dataclass
class _File:
    stat: tuple[int, int]
    digest: str
    error: str = ""
    retry_at: float | None = None
    retry_s: float = RETRY_FIRST_S


class ManifestDir:
    def __init__(
        self,
        directory: Path,
        workloads: Workloads,
        *,
        poll_seconds: float = 2.0,
        ignore_unknown: bool = False,
        clock: Callable[[], float] = time.monotonic,
        root_dir: Path | None = None,
    ) -> None:
        self.dir = Path(directory)
        #: hwagent's root dir, when the directory lies under it (then no link on the way is followed)
        self.root_dir = Path(root_dir) if root_dir is not None and self.dir.is_relative_to(root_dir) else None
        self.w = workloads
        self.poll_seconds = poll_seconds
        self.ignore_unknown = ignore_unknown
        self.clock = clock
        self._files: dict[Path, _File] = {}
        self._task: asyncio.Task[None] | None = None
        self.passes = 0
        self.failed_passes = 0

    # --- what hwagent ps shows --------------------------------------------------------

    def errors(self) -> list[tuple[str, str]]:
        return sorted((str(p), f.error) for p, f in self._files.items() if f.error)

    # --- the loop ------------------------------------------------------------------------

    async def start(self) -> None:
        if self.root_dir is not None:
            ensure_dir(self.root_dir, self.dir.relative_to(self.root_dir), mode=DIR_MODE)
        else:
            self.dir.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="manifest-dir")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _loop(self) -> None:
        while True:
            try:
                await self.sync_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - one bad pass must not end static pods
                self.failed_passes += 1
                log.exception("manifest dir pass failed", dir=self.dir)
            await asyncio.sleep(self.poll_seconds)

    def _scan(self) -> dict[Path, tuple[int, int]]:
        """Every manifest-named entry with its (mtime, size), links and other
        non-files included (by their own lstat), so that ``_read`` reports them once."""
        out: dict[Path, tuple[int, int]] = {}
        try:
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return out
        for e in entries:
            if e.name.startswith(".") or not e.name.endswith(SUFFIXES):
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            out[Path(e.path)] = (st.st_mtime_ns, st.st_size)
        return out

    def _read(self, path: Path) -> bytes:
        if self.root_dir is not None:
            dfd = open_dir(self.root_dir, self.dir.relative_to(self.root_dir), tighten=False)
        else:
            dfd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            try:
                fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
            except OSError as e:
                if e.errno != errno.ELOOP:
                    raise
                raise OSError(errno.ELOOP, "it is a symbolic link; the manifest directory takes only regular "
                                           "files, never followed (copy the manifest in instead)") from None
        finally:
            os.close(dfd)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise OSError(errno.EINVAL, "not a regular file (the manifest directory takes only regular files)")
            return f.read(MAX_MANIFEST_BYTES + 1)

    async def sync_once(self) -> None:
        """One comparison of the directory with what is admitted from it."""
        loop = asyncio.get_running_loop()
        seen = await loop.run_in_executor(None, self._scan)
        self.passes += 1
        # removed files: their pods go
        for path in sorted(set(self._files) - set(seen)):
            del self._files[path]
            await self._remove_from(path, "file removed")
        for rec in self.w.registry.records():
            src = rec.pod.spec.source
            if src.startswith("file:") and Path(src[5:]).parent == self.dir and Path(src[5:]) not in seen:
                await self._remove_from(Path(src[5:]), "file removed")
        now = self.clock()
        for path, st in sorted(seen.items()):
            known = self._files.get(path)
            if known is not None and known.stat == st and not (known.retry_at is not None and now >= known.retry_at):
                continue
            try:
                raw = await loop.run_in_executor(None, self._read, path)
            except OSError as e:
                self._set_error(path, st, "", f"cannot read: {e.strerror or e}")
                continue
            digest = hashlib.sha256(raw).hexdigest()
            if known is not None and known.digest == digest and known.retry_at is None:
                known.stat = st  # touched, not changed
                continue
            await self._apply(path, st, raw, digest)
        m.MANIFEST_FILE_ERRORS.set(sum(1 for f in self._files.values() if f.error))

    def _admitted_from(self, path: Path):
        src = source_of(path)
        return [r for r in self.w.registry.records() if r.pod.spec.source == src]

    async def _remove_from(self, path: Path, why: str) -> None:
        for rec in self._admitted_from(path):
            try:
                await self.w.remove(rec.pod.spec.name, rec.pod.spec.namespace)
            except AdmissionError as e:
                log.warning("static pod remove failed", path=path, pod=rec.key, error=e.message)
                continue
            m.MANIFEST_SYNCS.labels("removed").inc()
            log.info("static pod removed", path=path, pod=rec.key, why=why)

    def _set_error(self, path: Path, st: tuple[int, int], digest: str, error: str, retry: bool = False) -> None:
        prev = self._files.get(path)
        f = _File(st, digest, error)
        if retry:
            f.retry_s = min(RETRY_MAX_S, prev.retry_s * 2) if prev is not None and prev.retry_at is not None else RETRY_FIRST_S
            f.retry_at = self.clock() + f.retry_s
        if prev is None or prev.error != error:
            log.warning("static manifest bad", path=path, error=error)
        self._files[path] = f

    async def _apply(self, path: Path, st: tuple[int, int], raw: bytes, digest: str) -> None:
        # UUID-shaped (36 characters, the UID bound everywhere) and stable for a path + content
        ident = str(uuid.UUID(hex=hashlib.sha256(os.fsencode(path) + b"\0" + raw).hexdigest()[:32]))
        try:
            parsed = await asyncio.to_thread(
                parse_manifest, raw, ignore_unknown=self.ignore_unknown, source=source_of(path),
                new_uid=lambda: ident,
            )
        except ManifestError as e:
            # the pod admitted from the previous content stays: a bad edit does not take it away
            self._set_error(path, st, digest, f"invalid manifest: {e}")
            return
        spec = dataclasses.replace(parsed.pod, source_digest=digest)
        current = self._admitted_from(path)
        if any(r.pod.spec.source_digest == digest and r.pod.spec.key == spec.key for r in current):
            self._files[path] = _File(st, digest)  # admitted before a restart: nothing to do
            return
        action = "replaced" if current else "admitted"
        for rec in current:
            try:
                await self.w.remove(rec.pod.spec.name, rec.pod.spec.namespace)
            except AdmissionError as e:
                self._set_error(path, st, digest, f"cannot replace {rec.key}: {e.message}", retry=True)
                return
        try:
            await self.w.admit(spec)
        except AdmissionError as e:
            self._set_error(path, st, digest, f"{e.code}: {e.message}", retry=e.code in _RETRY_CODES)
            return
        for w in parsed.warnings:
            log.warning("static manifest field ignored", path=path, warning=w)
        self._files[path] = _File(st, digest)
        m.MANIFEST_SYNCS.labels(action).inc()
        log.info("static pod applied", action=action, path=path, pod=spec.key, uid=spec.uid)
