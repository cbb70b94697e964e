"""One AWS JSON-protocol service, called without botocore's per-call machinery (see the package).

:func:`lean_client_for` builds a :class:`LeanJsonClient` from a boto3 client, taking everything from it:
the endpoint (botocore resolved it from the region, ``AWS_ENDPOINT_URL*`` or the configured endpoint),
the signing region and name, the connect and read timeouts, the pool size, the CA bundle and the
credentials object (frozen at each call, so refreshing credentials keep working). When the client's
settings are beyond the lean path it returns None and logs why, once per reason, at INFO.

:meth:`LeanJsonClient.call` returns a successful reply's body. It raises what botocore would for the
same reply, so that :func:`kcl_daemon.aws.errors.map_aws_errors` maps it as before: an error reply is
parsed by botocore's own parser into a ``ClientError``; a 2xx reply whose length or CRC32 does not match
raises :class:`~kcl_daemon.aws.errors.IncompleteResponse`; transport faults surface as the standard
library's ``OSError`` / ``http.client.HTTPException``. Each call is reported on the boto3 client's
``after-call`` / ``after-call-error`` events, as botocore reports its own, so the call counters see it.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
import weakref
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, NamedTuple
from urllib.parse import urlsplit

import botocore.parsers
import orjson
from botocore.awsrequest import HeadersDict
from botocore.exceptions import ClientError

from kcl_daemon.aws.errors import IncompleteResponse
from kcl_daemon.aws.lean.connections import ConnectionPool
from kcl_daemon.aws.lean.sigv4 import FrozenCredentials, Signer

if TYPE_CHECKING:  # asyncio and the event-loop path load on first use: the Spark driver never needs them
    from kcl_daemon.aws.lean.aio import AsyncConnectionPool

logger = logging.getLogger(__name__)

USER_AGENT: Final = "kcl-daemon-lean/1 (http.client)"
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_STUBBER: Final = "boto_stubber"  # the unique id botocore.stub.Stubber registers its handler under
_LOGGED: set[str] = set()
_NO_CACHE: Final[dict[str, Any]] = {}
_LOCK = threading.Lock()
#: one lean client (one connection pool) per boto3 client, for as long as the boto3 client lives
_BY_CLIENT: weakref.WeakKeyDictionary[Any, LeanJsonClient | None] = weakref.WeakKeyDictionary()


def _log_once(reason: str | None, endpoint: str) -> None:
    """Say once per process which path serves the reads (and why not the lean one)."""
    key = reason or f"lean path to {endpoint}"
    with _LOCK:
        if key in _LOGGED:
            return
        _LOGGED.add(key)
    if reason is None:
        logger.info("AWS calls: the lean request path serves the frequent calls to %s", endpoint)
    else:
        logger.info("AWS calls: botocore serves the frequent calls too: %s", reason)


_STAMP: tuple[int, str] = (0, "")  # (epoch second, its X-Amz-Date): swapped whole, thread-safe


def _stamp() -> str:
    """SigV4's ``X-Amz-Date`` of now, formatted once per second (formatting cost more than signing)."""
    global _STAMP
    second = int(time.time())
    cached = _STAMP
    if cached[0] == second:
        return cached[1]
    text = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(second))
    _STAMP = (second, text)
    return text


class _ErrorReply(NamedTuple):
    """What the ``after-call`` handlers read of an error reply (a 2xx reply is reported as None: the
    lean path has checked it, and the handlers then count it as answered)."""

    status_code: int
    headers: Any
    content: bytes


class LeanJsonClient:
    """Signed ``POST /`` calls of one JSON-protocol service (thread-safe)."""

    def __init__(
        self,
        client: Any,
        pool: ConnectionPool,
        host_header: str,
        signer: Signer,
        credentials: Any,
        *,
        clock: Callable[[], str] = _stamp,
    ) -> None:
        meta = client.meta
        model = meta.service_model
        self._events = meta.events
        self._event_prefix = model.service_id.hyphenize()
        self.pool = pool
        self._host = host_header
        self._signer = signer
        self._credentials = credentials
        self._clock = clock
        self._target_prefix = model.metadata["targetPrefix"]
        self._content_type = f"application/x-amz-json-{model.metadata.get('jsonVersion', '1.0')}"
        self._models: dict[str, Any] = {}
        self._parser = botocore.parsers.create_parser(model.metadata["protocol"])
        self._model_of = model.operation_model
        self._hooks: dict[str, Any] = meta.events._emitter._unique_id_handlers
        self._aio_pool: AsyncConnectionPool | None = None
        self._emitter = getattr(meta.events, "_emitter", None)
        self._aliased: dict[str, str] = {}

    def _emit(self, event: str, **kwargs: Any) -> None:
        """``events.emit(event, **kwargs)`` without its per-call overhead (aliasing, logging: half the
        cost of reporting a call): the handlers the emitter has already resolved for ``event`` are
        called directly; until it has (and after any handler change, which clears its cache), the
        emitter emits."""
        aliased = self._aliased.get(event)
        if aliased is None:
            alias = getattr(self._events, "_alias_event_name", None)
            aliased = self._aliased[event] = alias(event) if alias is not None else event
        handlers = getattr(self._emitter, "_lookup_cache", _NO_CACHE).get(aliased)
        if handlers is None:
            self._events.emit(event, **kwargs)
            return
        kwargs["event_name"] = aliased
        for handler in handlers:
            handler(**kwargs)

    def usable(self) -> bool:
        """False while a botocore ``Stubber`` is active on the client (its stubs answer, not the lean
        path): checked at every call, a dictionary look-up."""
        return _STUBBER not in self._hooks

    def _model(self, operation: str) -> Any:
        found = self._models.get(operation)
        if found is None:
            found = self._models[operation] = self._model_of(operation)
        return found

    def frozen_credentials(self) -> FrozenCredentials:
        frozen = self._credentials.get_frozen_credentials()
        return FrozenCredentials(frozen.access_key, frozen.secret_key, frozen.token or None)

    def call_params(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """One call of ``operation`` with ``params`` in their wire form (see :mod:`.dynamodb`): the
        reply as a JSON object. The call's parameters are announced on the client's
        ``before-parameter-build`` event first, as botocore does (the table-contact watch reads them)."""
        model = self._model(operation)
        context: dict[str, Any] = {}
        self._emit(  # the handlers resolved already: 1.6 us instead of emit's 12 (every lease write)
            f"before-parameter-build.{self._event_prefix}.{operation}",
            params=params,
            model=model,
            context=context,
        )
        body = self.call(operation, orjson.dumps(params), context=context)
        try:
            reply = orjson.loads(body)
        except ValueError as exc:
            raise IncompleteResponse(error="a reply that is not JSON") from exc
        if not isinstance(reply, dict):
            raise IncompleteResponse(error="a reply that is not a JSON object")
        return reply

    def _headers(self, operation: str, body: bytes, credentials: FrozenCredentials) -> dict[str, str]:
        headers = self._signer.headers(
            self._host,
            f"{self._target_prefix}.{operation}",
            self._content_type,
            body,
            credentials,
            self._clock(),
        )
        headers["Host"] = self._host
        headers["User-Agent"] = USER_AGENT
        return headers

    def _failed(self, operation: str, context: dict[str, Any], exc: BaseException) -> None:
        self._emit(
            f"after-call-error.{self._event_prefix}.{operation}",
            model=self._model(operation),
            exception=exc,
            context=context,
        )

    def _answered(
        self, operation: str, context: dict[str, Any], status: int, headers: Any, body: bytes
    ) -> bytes:
        """``body`` when ``status`` says success (and the body is whole), else the mapped error raised;
        the call reported on the client's events either way."""
        model = self._model(operation)
        if 200 <= status < 300:
            _check_whole(headers, body)
            self._emit(
                f"after-call.{self._event_prefix}.{operation}",
                model=model,
                parsed={},
                http_response=None,
                context=context,
            )
            return body
        parsed = self._parser.parse(
            {
                "status_code": status,
                "headers": HeadersDict(headers.items()),
                "body": body,
                "context": {"operation_name": operation},
            },
            model.output_shape,
        )
        self._emit(
            f"after-call.{self._event_prefix}.{operation}",
            model=model,
            parsed=parsed,
            http_response=_ErrorReply(status, HeadersDict(headers.items()), body),
            context=context,
        )
        raise ClientError(parsed, operation)

    def call(self, operation: str, body: bytes, *, context: dict[str, Any] | None = None) -> bytes:
        """One call of ``operation`` with the JSON ``body``; the reply's body when it succeeded."""
        context = {} if context is None else context
        headers = self._headers(operation, body, self.frozen_credentials())
        try:
            reply = self.pool.post(headers, body)
        except Exception as exc:
            self._failed(operation, context, exc)
            raise
        return self._answered(operation, context, reply.status, reply.headers, reply.body)

    async def _frozen_credentials_async(self) -> FrozenCredentials:
        """The credentials of the moment; a refresh due (a network call of the provider) runs on a
        thread, never on the event loop."""
        refresh_needed = getattr(self._credentials, "refresh_needed", None)
        if refresh_needed is not None and refresh_needed():
            import asyncio

            return await asyncio.to_thread(self.frozen_credentials)
        return self.frozen_credentials()

    def aio_pool(self) -> AsyncConnectionPool:
        """The event loop's connections to the same endpoint, with the same timeouts and limit."""
        pool = self._aio_pool
        if pool is None:
            from kcl_daemon.aws.lean.aio import AsyncConnectionPool

            sync = self.pool
            pool = self._aio_pool = AsyncConnectionPool(
                sync.scheme,
                sync.host,
                sync.port,
                connect_timeout_s=sync.connect_timeout_s,
                read_timeout_s=sync.read_timeout_s,
                max_open=sync.max_idle,
                ssl_context=sync.ssl_context,
            )
        return pool

    async def call_async(self, operation: str, body: bytes) -> bytes:
        """:meth:`call` on the event loop (:mod:`.aio`): the same request, reply, errors and events."""
        context: dict[str, Any] = {}
        headers = self._headers(operation, body, await self._frozen_credentials_async())
        head = "".join([f"{name}: {value}\r\n" for name, value in headers.items()])
        request = f"POST / HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode()
        try:
            reply = await self.aio_pool().post(request, body)
        except Exception as exc:
            self._failed(operation, context, exc)
            raise
        return self._answered(operation, context, reply.status, reply.headers, reply.body)

    def close(self) -> None:
        self.pool.close()
        if self._aio_pool is not None:
            self._aio_pool.close()


def _check_whole(headers: Any, body: bytes) -> None:
    """What :func:`kcl_daemon.aws.errors.guard_responses` checks on botocore's replies."""
    crc = headers.get("x-amz-crc32")
    if crc is not None and crc.isdigit() and int(crc) != zlib.crc32(body) & 0xFFFFFFFF:
        raise IncompleteResponse(error="a reply whose CRC32 does not match its body")


def _why_not(client: Any) -> str | None:
    """Why the lean path cannot serve ``client``'s settings (None: it can)."""
    config = client.meta.config
    signer = client._request_signer
    if signer.signature_version != "v4":
        return f"signature version {signer.signature_version} (unsigned or not SigV4)"
    if signer._credentials is None:
        return "no credentials (botocore reports it)"
    if client.meta.service_model.metadata.get("protocol") not in ("json",):
        return "not a JSON-protocol service"
    parts = urlsplit(client.meta.endpoint_url)
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return f"endpoint {client.meta.endpoint_url} is not a plain http(s) origin"
    if parts.username or parts.password or parts.query:
        return "the endpoint URL carries credentials or a query"
    session = client._endpoint.http_session
    if config.proxies or session._proxy_config.proxy_url_for(client.meta.endpoint_url):
        return "a proxy is configured"
    if config.client_cert:
        return "client certificates are configured"
    if session._verify is False:
        return "TLS verification is off"
    if config.tcp_keepalive:
        return "tcp_keepalive is configured"
    return None


def lean_client_for(client: Any) -> LeanJsonClient | None:
    """The lean client for the service of the boto3 ``client``, or None (and the reason logged once).

    One per boto3 client: its connections are closed when the boto3 client is collected."""
    try:
        with _LOCK:
            if client in _BY_CLIENT:
                return _BY_CLIENT[client]
    except TypeError:  # not a boto3 client (a test's stand-in): nothing to keep it for
        return None
    built = _build(client)
    with _LOCK:
        found = _BY_CLIENT.setdefault(client, built)
    if found is not built and built is not None:
        built.close()
    elif built is not None:
        weakref.finalize(client, built.close)  # the pools hold no reference to the client
    return found


def _build(client: Any) -> LeanJsonClient | None:
    try:
        reason = _why_not(client)
    except AttributeError as exc:  # botocore's internals moved: stay on botocore
        reason = f"botocore's client internals are not as expected ({exc})"
    _log_once(reason, str(getattr(client.meta, "endpoint_url", "")))
    if reason is not None:
        return None
    config = client.meta.config
    parts = urlsplit(client.meta.endpoint_url)
    scheme, host = parts.scheme, str(parts.hostname)
    port = parts.port or _DEFAULT_PORTS[scheme]
    context = None
    if scheme == "https":
        verify = client._endpoint.http_session._verify
        context = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
    bracketed = f"[{host}]" if ":" in host else host
    host_header = bracketed if port == _DEFAULT_PORTS[scheme] else f"{bracketed}:{port}"
    signer = client._request_signer
    pool = ConnectionPool(
        scheme,
        host,
        port,
        connect_timeout_s=float(config.connect_timeout),
        read_timeout_s=float(config.read_timeout),
        max_idle=int(config.max_pool_connections),
        ssl_context=context,
    )
    return LeanJsonClient(
        client,
        pool,
        host_header,
        Signer(signer._signing_name, signer._region_name),
        signer._credentials,
    )
