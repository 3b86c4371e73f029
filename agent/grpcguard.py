"""Every hwagent gRPC server is made here: message limits per API and one guard
around every method.

Without the guard, grpc.aio turns an exception escaping a servicer into
``UNKNOWN: Unexpected <class ...>`` and logs an error-level traceback per call;
a body that does not decode does the same before the servicer ever runs (about
800 log bytes per 64-byte request under a fuzzer). The guard decides instead:

- a body that does not decode as the method's request type: ``INVALID_ARGUMENT``
  naming the type, never a traceback;
- a :class:`agent.limits.LimitError` (a bounded field over its bound):
  ``INVALID_ARGUMENT`` with its message;
- anything else unexpected: ``INTERNAL`` (a bug in hwagent, never ``UNKNOWN``),
  one error log line with the traceback (repeats are rate-limited by the log
  handler) and ``hwagent_grpc_internal_errors_total``.

Oversized bodies never reach Python: the transport refuses them
(``RESOURCE_EXHAUSTED``) at the server's ``max_receive_message_length``. Bodies
above :data:`OFFLOAD_BYTES` that are allowed are decoded in a worker thread, so
the one event loop keeps answering the small requests queued behind them.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from prometheus_client import Counter

from agent.eventlog import get_logger
from agent.limits import GRPC_MESSAGE_LIMITS, LimitError

__all__ = ["OFFLOAD_BYTES", "Guard", "INTERNAL_ERRORS", "REJECTED", "new_server"]

log = get_logger("hwagent.grpc")

#: request bodies at least this large are decoded off the event loop
OFFLOAD_BYTES = 64 * 1024

REJECTED = Counter(
    "hwagent_grpc_rejected_requests_total",
    "Requests the gRPC guard refused before or around the handler, by API, method and reason",
    ["api", "method", "reason"],
)
INTERNAL_ERRORS = Counter(
    "hwagent_grpc_internal_errors_total",
    "Unexpected exceptions in hwagent's gRPC handlers, answered INTERNAL (each one is a bug)",
    ["api", "method", "exception"],
)


class _Undecodable:
    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class _Deferred:
    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw


def _safe_deserializer(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any]:
    def decode(raw: bytes) -> Any:
        if deserialize is None:
            return raw
        if len(raw) >= OFFLOAD_BYTES:
            return _Deferred(raw)
        try:
            return deserialize(raw)
        except Exception as e:  # noqa: BLE001 - any decode failure is the caller's bad body
            return _Undecodable(e)

    return decode


class Guard(grpc.aio.ServerInterceptor):
    """Wraps each method handler once (cached per method) with the mapping above."""

    def __init__(self, api: str) -> None:
        self.api = api
        self._cache: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler  # unknown method: grpc answers UNIMPLEMENTED itself
        method = handler_call_details.method
        cached = self._cache.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self._wrap(method, handler)
        self._cache[method] = (handler, wrapped)
        return wrapped

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        short = method.rsplit("/", 1)[-1]
        deserialize = handler.request_deserializer
        safe = _safe_deserializer(deserialize)
        if handler.unary_unary is not None:
            # the aio server's handlers are coroutine functions; the stubs type the sync ones
            inner_uu: Callable[..., Any] = handler.unary_unary

            async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                request = await self._decoded(short, request, deserialize, context)
                try:
                    return await inner_uu(request, context)
                except Exception as e:  # noqa: BLE001
                    await self._fail(short, e, context)

            return grpc.unary_unary_rpc_method_handler(
                unary_unary, request_deserializer=safe, response_serializer=handler.response_serializer
            )
        if handler.unary_stream is not None:
            inner_us: Callable[..., Any] = handler.unary_stream

            async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                request = await self._decoded(short, request, deserialize, context)
                result = None
                try:
                    result = inner_us(request, context)
                    if inspect.isasyncgen(result):
                        async for item in result:
                            yield item
                    else:
                        await result
                except Exception as e:  # noqa: BLE001
                    await self._fail(short, e, context)
                finally:
                    if inspect.isasyncgen(result):
                        await result.aclose()  # the handler's own cleanup runs now, not at garbage collection

            return grpc.unary_stream_rpc_method_handler(
                unary_stream, request_deserializer=safe, response_serializer=handler.response_serializer
            )
        return handler  # no client-streaming method in the APIs hwagent serves

    async def _decoded(
        self, method: str, request: Any, deserialize: Callable[[bytes], Any] | None, context: grpc.aio.ServicerContext
    ) -> Any:
        if isinstance(request, _Deferred) and deserialize is not None:
            try:
                request = await asyncio.get_running_loop().run_in_executor(None, deserialize, request.raw)
            except Exception as e:  # noqa: BLE001
                request = _Undecodable(e)
        if isinstance(request, _Undecodable):
            REJECTED.labels(self.api, method, "undecodable").inc()
            log.warning("grpc request undecodable", api=self.api, method=method, error=str(request.error))
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"{method}: the request body does not decode: {request.error}"
            )
        return request

    async def _fail(self, method: str, e: Exception, context: grpc.aio.ServicerContext) -> None:
        if isinstance(e, grpc.aio.AbortError):
            raise e  # the handler chose its status already
        if isinstance(e, LimitError):
            REJECTED.labels(self.api, method, "limit").inc()
            log.warning("grpc request refused", api=self.api, method=method, kind=e.kind, error=str(e))
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        INTERNAL_ERRORS.labels(self.api, method, type(e).__name__).inc()
        log.error("grpc handler failed", api=self.api, method=method, exception=type(e).__name__, exc_info=e)
        await context.abort(grpc.StatusCode.INTERNAL, f"{method}: internal error in hwagent ({type(e).__name__})")


def new_server(api: str, options: tuple[tuple[str, Any], ...] = ()) -> grpc.aio.Server:
    """A grpc.aio server for ``api`` (a key of GRPC_MESSAGE_LIMITS), limits set and guarded;
    ``options``: more channel arguments (the admission server's idle timeout)."""
    limits = GRPC_MESSAGE_LIMITS[api]
    return grpc.aio.server(interceptors=[Guard(api)], options=[*limits.options(), *options])
