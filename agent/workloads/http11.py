"""A minimal, strict HTTP/1.1 server side for the CLI's JSON API (``agent.workloads.cliapi``).

Why not a framework: the only client is ``hwagent`` itself (a bare socket,
``agent.commands._admission``) and ``curl --unix-socket``; what they send is a request line,
a few headers and at most one manifest. So this reads exactly that and refuses
everything else with a status and one line, before any handler runs:

- the head (request line and headers) is at most ``MAX_HEAD`` bytes and
  ``MAX_HEADERS`` lines (431 past either);
- the request line is ``METHOD SP /path[?query] SP HTTP/1.1`` (400; 505 for
  another version);
- a body has one ``Content-Length`` of digits only, at most ``max_body`` bytes
  (413, refused before a byte of it is read); ``Transfer-Encoding`` is refused
  (501): nothing we serve needs a chunked upload;
- the connection is kept open for the next request (``launch --wait`` polls on
  one) unless the client says ``Connection: close`` or the request was refused
  (after a refusal the stream's framing cannot be trusted).

The framing rules (head size, header lines, Content-Length) are
``agent.workloads.wire``'s, shared with the client. ``parse_head`` is pure;
``serve_connection`` is the thin I/O loop around it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from agent.workloads.wire import MAX_HEAD, MAX_HEADERS, REASONS, TOKEN, WireError, body_length, header_fields, \
    response_head, split_head

__all__ = ["Request", "Response", "HttpError", "parse_head", "serve_connection", "render",
           "MAX_HEAD", "MAX_HEADERS", "REASONS"]

#: how long a client may take to send a complete request (head and body) after the connection
#: opened or the last answer went out, unless ``serve_connection`` is given its own
#: (``[workloads] connection_idle_seconds``); a request being answered (a long poll) is not idle
READ_TIMEOUT_S = 60.0


class HttpError(Exception):
    """A request refused before any handler ran: ``status`` and the one line the client sees."""

    def __init__(self, status: int, message: str, code: str = "INVALID_ARGUMENT") -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


@dataclass(frozen=True)
class Request:
    method: str
    #: the path, percent-decoded, split at "/" (empty parts dropped): ("v1", "pods", "default", "web")
    parts: tuple[str, ...]
    query: dict[str, str]
    #: header names lower-cased
    headers: dict[str, str]
    body: bytes = b""

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"

    def json(self) -> dict[str, Any]:
        """The body as a JSON object ({} when empty); 400 saying what is wrong otherwise."""
        if not self.body:
            return {}
        try:
            value = json.loads(self.body)
        except (ValueError, UnicodeDecodeError) as e:
            raise HttpError(400, f"the request body is not valid JSON: {e}") from None
        if not isinstance(value, dict):
            raise HttpError(400, f"the request body must be a JSON object, got {type(value).__name__}")
        return value


@dataclass(frozen=True)
class Response:
    status: int
    body: dict[str, Any] = field(default_factory=dict)
    #: the body already encoded as JSON (sent as it is, ``body`` ignored): an answer its handler
    #: encodes itself (the status views, with sorted keys, as the gRPC status API encodes them)
    raw: bytes | None = None


def parse_head(head: bytes, max_body: int) -> tuple[Request, int]:
    """The request a head (up to and with the blank line) describes, and its body's length.
    Raises HttpError for anything this server does not take."""
    try:
        lines = split_head(head)
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not parts[0] or not all(b in TOKEN for b in parts[0]):
            raise HttpError(400, "the request line must be METHOD SP TARGET SP HTTP/1.1")
        method, target, version = (p.decode("latin-1") for p in parts)
        if version != "HTTP/1.1":
            raise HttpError(505, f"only HTTP/1.1 is served, got {version[:16]!r}")
        if not target.startswith("/"):
            raise HttpError(400, "the request target must be a path starting with /")
        headers = header_fields(lines[1:])
        length = body_length(headers, max_body)
    except WireError as e:
        raise HttpError(e.status, e.message) from None
    url = urlsplit(target)
    try:
        query = dict(parse_qsl(url.query, keep_blank_values=True, strict_parsing=bool(url.query)))
    except ValueError:
        raise HttpError(400, f"malformed query string {url.query[:40]!r}") from None
    path = tuple(unquote(p) for p in url.path.split("/") if p)
    return Request(method, path, query, headers), length


def render(resp: Response, keep_alive: bool) -> bytes:
    body = resp.raw if resp.raw is not None else json.dumps(resp.body, separators=(",", ":")).encode()
    return response_head(resp.status, len(body), keep_alive) + body


async def _read_request(reader: asyncio.StreamReader, max_body: int) -> Request | None:
    """The next request, or None when the client closed between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise HttpError(400, "the connection closed inside a request head") from None
    except asyncio.LimitOverrunError:
        raise HttpError(431, f"the request head is larger than {MAX_HEAD} bytes") from None
    req, length = parse_head(head, max_body)
    if length:
        try:
            body = await reader.readexactly(length)
        except asyncio.IncompleteReadError:
            raise HttpError(400, f"the connection closed before the {length} body bytes Content-Length announced") \
                from None
        req = Request(req.method, req.parts, req.query, req.headers, body)
    return req


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           handle: Callable[[Request], Awaitable[Response]], max_body: int,
                           idle_s: float = READ_TIMEOUT_S) -> None:
    """Answer requests on one connection until the client closes it, asks to, sends one we refuse,
    or sends no complete request within ``idle_s`` (then it is closed without a word, as HTTP
    servers close idle keep-alive connections: a client retries on a new one).
    ``reader`` must have been made with ``limit=MAX_HEAD``."""
    try:
        while True:
            try:
                req = await asyncio.wait_for(_read_request(reader, max_body), idle_s)
            except HttpError as e:
                writer.write(render(Response(e.status, {"code": e.code, "message": e.message}), False))
                await writer.drain()
                return
            except TimeoutError:
                return
            if req is None:
                return
            resp = await handle(req)
            writer.write(render(resp, req.keep_alive))
            await writer.drain()
            if not req.keep_alive:
                return
    except (ConnectionError, OSError):
        return
    finally:
        writer.close()
