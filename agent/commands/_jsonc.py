"""The CLI's JSON through the C accelerator alone: ``agent.jsonc`` (below the command line, so the
status client under agent/status shares it), under the name the commands import."""

from __future__ import annotations

from agent.jsonc import dumps, loads

__all__ = ["loads", "dumps"]
