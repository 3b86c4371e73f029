"""``/metrics`` and ``/healthz`` over a minimal HTTP/1.1 server on the daemon's asyncio loop.

Why not prometheus_client's ``start_http_server``: it serves from its own
thread, and collectors that read daemon state (component health, allocation
counts) would then race the loop that owns that state. Served from the loop,
a scrape is just one more event. Exposition itself (text 0.0.4 or OpenMetrics,
chosen from the Accept header) is prometheus_client's ``choose_encoder``.

The server is deliberately small: GET and HEAD, one request per connection,
bounded request size and read time, so a stuck or hostile client costs one
coroutine and is dropped. Connections are bounded too (MAX_CONNECTIONS): any
local user can connect, and idle connections would otherwise hold one file
descriptor each until the daemon has none left for its checkpoints and gRPC
sockets. At the bound a new connection displaces the oldest one that has not
sent its request yet (a scraper sends at once, an idle hog never does), or is
refused with 503 when every connection is busy being served.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from prometheus_client import REGISTRY
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from agent.eventlog import get_logger
from agent.tasks import cancel_and_wait

__all__ = ["HealthReport", "MetricsServer", "Response", "handle_request"]

log = get_logger("hwagent.metrics")

#: a request line plus headers larger than this is refused (431)
MAX_REQUEST_BYTES = 16 * 1024
#: a client that has not sent its full request after this long is dropped
READ_TIMEOUT_S = 10.0
#: connections served at once; one more displaces the oldest idle one (see the module doc)
MAX_CONNECTIONS = 64
#: listen backlog (and asyncio's accepts per wake-up); scrapers are few, this is plenty
ACCEPT_BACKLOG = 32

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class HealthReport:
    ok: bool
    #: one line per problem when not ok ("starting", "unhealthy: a, b")
    detail: str = ""
    #: one line per component: health and readiness ("pressure: healthy, not ready (loading probes)")
    components: tuple[str, ...] = ()


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


def _text(status: int, text: str, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    return Response(status, text.encode(), headers=headers)


def handle_request(
    method: str,
    target: str,
    headers: dict[str, str],
    health: Callable[[], HealthReport],
    registry: CollectorRegistry = REGISTRY,
) -> Response:
    """Route one parsed request. Pure apart from running the collectors, so tests call it directly."""
    if method not in ("GET", "HEAD"):
        return _text(405, "only GET and HEAD\n", (("Allow", "GET, HEAD"),))
    url = urlsplit(target)
    if url.path == "/metrics":
        names = parse_qs(url.query).get("name[]")
        source = registry.restricted_registry(names) if names else registry
        encoder, content_type = choose_encoder(headers.get("accept", ""))
        body = encoder(source)
        extra: tuple[tuple[str, str], ...] = ()
        if "gzip" in headers.get("accept-encoding", ""):
            body = gzip.compress(body, compresslevel=5)
            extra = (("Content-Encoding", "gzip"),)
        return Response(200, body, content_type, extra)
    if url.path == "/healthz":
        report = health()
        per_component = "".join(f"{line}\n" for line in report.components)
        if report.ok:
            return _text(200, f"ok\n{per_component}")
        return _text(503, f"{report.detail or 'unhealthy'}\n{per_component}")
    if url.path == "/":
        return _text(200, "hwagent\n/metrics  Prometheus metrics\n/healthz  health of the daemon's components\n")
    return _text(404, f"no such path {url.path}\n")


def _serialize(resp: Response, head_only: bool) -> bytes:
    lines = [
        f"HTTP/1.1 {resp.status} {_REASONS.get(resp.status, 'Unknown')}",
        f"Content-Type: {resp.content_type}",
        f"Content-Length: {len(resp.body)}",
        "Connection: close",
        *(f"{k}: {v}" for k, v in resp.headers),
    ]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + resp.body


def _parse_head(raw: bytes) -> tuple[str, str, dict[str, str]] | None:
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        return None
    request_line, *header_lines = text.split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    headers: dict[str, str] = {}
    for line in header_lines:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            return None
        headers[name.lower()] = value.strip()
    return parts[0], parts[1], headers


class MetricsServer:
    """Binds HOST:PORT on the running loop; ``address`` is the bound (host, port) after start()."""

    def __init__(
        self,
        host: str,
        port: int,
        health: Callable[[], HealthReport],
        registry: CollectorRegistry = REGISTRY,
    ) -> None:
        self.host = host
        self.port = port
        self.health = health
        self.registry = registry
        self.address: tuple[str, int] | None = None
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()
        #: clients that have not sent a full request yet, oldest first (dict keeps order)
        self._idle: dict[asyncio.Task[None], None] = {}
        self.max_connections = MAX_CONNECTIONS
        #: connections displaced or refused at the bound, for tests and the log
        self.displaced = 0
        self.refused = 0

    @property
    def url(self) -> str:
        assert self.address is not None, "not started"
        host, port = self.address
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}"

    async def start(self) -> None:
        # the backlog is also how many connections asyncio accepts per wake-up before our
        # bound sees them: kept small, descriptors in flight stay a few over the bound
        self._server = await asyncio.start_server(
            self._on_client, self.host, self.port, limit=MAX_REQUEST_BYTES, reuse_address=True,
            backlog=ACCEPT_BACKLOG,
        )
        sockname = self._server.sockets[0].getsockname()
        self.address = (sockname[0], sockname[1])

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        await cancel_and_wait(*self._clients)
        await self._server.wait_closed()
        self._server = None

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._clients) >= self.max_connections and not self._displace_oldest_idle():
            self.refused += 1
            if self.refused == 1 or self.refused % 1000 == 0:
                log.warning(
                    "metrics connection refused", reason="at the bound", max_connections=self.max_connections,
                    refused_total=self.refused,
                )
            await self._refuse(reader, writer)
            return
        self._clients.add(task)
        self._idle[task] = None
        try:
            await self._serve_one(reader, writer, task)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:  # never let one request take the endpoint down
            log.exception("metrics request failed")
        finally:
            self._clients.discard(task)
            self._idle.pop(task, None)
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, asyncio.CancelledError):
                pass

    def _displace_oldest_idle(self) -> bool:
        """Cancel the oldest client still waiting to send its request; False if none."""
        for oldest in self._idle:
            del self._idle[oldest]
            self._clients.discard(oldest)  # its slot is free now; it closes when it runs next
            oldest.cancel()
            self.displaced += 1
            return True
        return False

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """503 and close, reading what the client sent first for up to a second: closing
        with its request unread would reset the connection before it saw the answer."""
        try:
            writer.write(_serialize(_text(503, "too many connections\n"), False))
            if writer.can_write_eof():
                writer.write_eof()
            await asyncio.wait_for(reader.read(MAX_REQUEST_BYTES), 1.0)
            writer.close()
            await asyncio.wait_for(writer.wait_closed(), 1.0)
        except (ConnectionError, asyncio.TimeoutError, asyncio.CancelledError):
            writer.transport.abort()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         task: asyncio.Task[None] | None = None) -> None:
        try:
            raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
        except asyncio.LimitOverrunError:
            writer.write(_serialize(_text(431, "request too large\n"), False))
            await writer.drain()
            return
        except asyncio.TimeoutError:
            writer.write(_serialize(_text(408, "request timed out\n"), False))
            await writer.drain()
            return
        except asyncio.IncompleteReadError:
            return  # the client went away before finishing its request
        if task is not None:
            self._idle.pop(task, None)  # a request came: no longer displaceable
        parsed = _parse_head(raw[:-4])
        if parsed is None:
            writer.write(_serialize(_text(400, "malformed request\n"), False))
            await writer.drain()
            return
        method, target, headers = parsed
        try:
            resp = handle_request(method, target, headers, self.health, self.registry)
        except Exception:
            log.exception("metrics handler failed", path=target)
            resp = _text(500, "internal error, see the hwagent log\n")
        writer.write(_serialize(resp, head_only=method == "HEAD"))
        await writer.drain()
