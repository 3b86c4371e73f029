"""Claims from the ``<root>/dra/`` files, as the driver's ``ClaimSource``
(kubelet mode without an API server, and standalone mode)."""

from __future__ import annotations

import os

from agent.contracts.dra import ClaimRef
from agent.dra.claims import ClaimError, ResourceClaim
from agent.dra.files import ClaimFiles

__all__ = ["FileClaimSource"]


class FileClaimSource:
    def __init__(self, root_dir: str | os.PathLike[str]) -> None:
        self.files = ClaimFiles(root_dir)

    def claim(self, ref: ClaimRef) -> ResourceClaim:
        found = self.files.load().claims.get((ref.namespace, ref.name))
        if found is None:
            raise ClaimError(f"no ResourceClaim {ref.namespace}/{ref.name} in {self.files.dir}")
        return found
