import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A short directory instead of pytest's: these tests bind the kubelet's sockets under it
    (``kubelet/plugins/hwagent.io/dra.sock``), and a unix socket path is limited to 107 bytes,
    which ``/tmp/pytest-of-root/pytest-1003/test_.../`` exceeds once the run counter is long."""
    d = Path(tempfile.mkdtemp(prefix="dra-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
