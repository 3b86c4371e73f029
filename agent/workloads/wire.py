"""HTTP/1.1 framing of the CLI's API, for both ends: what a head may hold, how a body is delimited.

The daemon's server (``agent.workloads.http11``) and the CLI's client
(``agent.commands._admission``) frame messages by these rules, so the two cannot
drift apart: a head is lines ending CRLF, closed by an empty line, at most
``MAX_HEAD`` bytes and ``MAX_HEADERS`` header lines; a header is ``token ":"
value``; a body has one ``Content-Length`` of digits only and no
``Transfer-Encoding``. The client must start in a few milliseconds
(bench/cli.py compares ``hwagent launch`` with ``srun``), so this module imports
nothing: no ``http.client`` (with ``email`` and ``ssl`` behind it, most of a
client's start-up), no ``urllib``, no ``json``. Pure functions only; the I/O is
each side's own.
"""

from __future__ import annotations

__all__ = ["WireError", "MAX_HEAD", "MAX_HEADERS", "REASONS", "HEAD_END", "split_head", "header_fields", "body_length",
           "request_head", "response_head", "status_of", "quote", "urlencode"]

#: bytes of a head: start line + headers + the blank line
MAX_HEAD = 16 * 1024
MAX_HEADERS = 64
HEAD_END = b"\r\n\r\n"

REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
           409: "Conflict", 411: "Length Required", 413: "Content Too Large", 429: "Too Many Requests",
           431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
           503: "Service Unavailable", 504: "Gateway Timeout", 505: "HTTP Version Not Supported"}
TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
#: characters a path segment or query value keeps as they are (RFC 3986 unreserved)
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


class WireError(Exception):
    """A message these rules refuse: ``status`` (what a server answers) and one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def split_head(head: bytes) -> list[bytes]:
    """The lines of a head (start line first), without the closing empty line."""
    lines = head.split(b"\r\n")
    if lines[-2:] != [b"", b""]:
        raise WireError(400, "the head must end with CRLF CRLF")
    lines = lines[:-2]
    if len(lines) - 1 > MAX_HEADERS:
        raise WireError(431, f"more than {MAX_HEADERS} header lines")
    return lines


def header_fields(lines: list[bytes]) -> dict[str, str]:
    """Header lines as {lower-cased name: value}; a framing header given twice is refused."""
    headers: dict[str, str] = {}
    for raw in lines:
        name, sep, value = raw.partition(b":")
        if not sep or not name or not all(b in TOKEN for b in name):
            raise WireError(400, f"malformed header line {raw[:40].decode('latin-1')!r}")
        key = name.decode("latin-1").lower()
        if key in headers and key in ("content-length", "host", "transfer-encoding"):
            raise WireError(400, f"header {key} given twice")
        headers[key] = value.strip(b" \t").decode("latin-1")
    return headers


def body_length(headers: dict[str, str], max_body: int) -> int:
    """The body's length as ``Content-Length`` gives it (0 without one); chunked bodies are refused."""
    if "transfer-encoding" in headers:
        raise WireError(501, "Transfer-Encoding is not supported: send the body with a Content-Length")
    text = headers.get("content-length")
    if text is None:
        return 0
    if not text.isdigit() or not text.isascii() or len(text) > 19:
        raise WireError(400, f"Content-Length must be a number of bytes, got {text[:24]!r}")
    length = int(text)
    if length > max_body:
        raise WireError(413, f"the body of {length} bytes is larger than the {max_body} allowed")
    return length


def request_head(method: str, target: str, length: int) -> bytes:
    """A request's head; the connection stays open for the next request (``launch --wait`` polls on it)."""
    return f"{method} {target} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {length}\r\n\r\n".encode("ascii")


def response_head(status: int, length: int, keep_alive: bool) -> bytes:
    return (f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n"
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n").encode("ascii")


def status_of(line: bytes) -> int:
    """The status code of a response's status line ``HTTP/1.1 SP 3DIGIT SP reason``."""
    parts = line.split(b" ", 2)
    if len(parts) < 2 or parts[0] != b"HTTP/1.1" or len(parts[1]) != 3 or not parts[1].isdigit():
        raise WireError(502, f"not an HTTP/1.1 status line: {line[:40].decode('latin-1')!r}")
    return int(parts[1])


def quote(text: str) -> str:
    """``text`` percent-encoded (UTF-8) as one path segment or query value: every byte but the
    unreserved characters, ``/`` included."""
    if all(c in _UNRESERVED for c in text):
        return text
    return "".join(chr(b) if chr(b) in _UNRESERVED else f"%{b:02X}" for b in text.encode("utf-8"))


def urlencode(query: dict[str, str]) -> str:
    return "&".join(f"{quote(k)}={quote(v)}" for k, v in query.items())
