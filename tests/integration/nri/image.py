"""The NRI tests' one container image, built here: a static pause binary in an OCI archive.

No registry is reachable from CI and Debian packages no pause image, so the
tests make their own: ``pause.c`` compiled with ``gcc -static`` is the whole
root filesystem (one uncompressed layer), its entrypoint ``/pause``. The archive
is an OCI image layout (oci-layout, index.json, blobs/sha256/...) that
``ctr images import`` reads; the index names the image with containerd's
``io.containerd.image.name`` annotation. It serves as the CRI sandbox image and
as the containers' image alike.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

__all__ = ["IMAGE", "build_pause_archive"]

IMAGE = "localhost/hwagent-test/pause:1"
HERE = Path(__file__).resolve().parent


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return f"sha256:{digest}"


def _layer(binary: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as layer:
        info = tarfile.TarInfo("pause")
        data = binary.read_bytes()
        info.size, info.mode, info.mtime = len(data), 0o755, 0
        layer.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def build_pause_archive(workdir: Path, name: str = IMAGE) -> Path:
    """Compile pause.c and write ``workdir/pause-oci.tar``; returns its path."""
    binary = workdir / "pause"
    subprocess.run(["gcc", "-static", "-O2", "-o", str(binary), str(HERE / "pause.c")], check=True,
                   capture_output=True, timeout=120)
    layer = _layer(binary)
    out = workdir / "pause-oci.tar"
    with tarfile.open(out, "w") as tar:
        layer_digest = _blob(tar, layer)
        config = json.dumps({
            "architecture": "amd64", "os": "linux",
            "config": {"Entrypoint": ["/pause"], "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        }).encode()
        config_digest = _blob(tar, config)
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest,
                       "size": len(config)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest,
                        "size": len(layer)}],
        }).encode()
        manifest_digest = _blob(tar, manifest)
        index = json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest,
                           "size": len(manifest), "platform": {"architecture": "amd64", "os": "linux"},
                           "annotations": {"io.containerd.image.name": name,
                                           "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]}}],
        }).encode()
        for member, data in (("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'), ("index.json", index)):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out
