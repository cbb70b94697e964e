"""The metrics port: ``/metrics`` (Prometheus), ``/healthz`` (liveness), ``/readyz`` (readiness) and the
status page (``/`` and ``/status.json``).

One small threaded WSGI server on a daemon thread, 127.0.0.1 by default (``run --metrics-host``). Its
threads never wait for the event loop: the health answers are computed from plain state by a
:class:`HealthSource` (the worker's), so ``/healthz`` still answers, red, while the loop is blocked.

* ``/healthz``: 200 while the worker is alive, 503 when it should be restarted; JSON body
  ``{"status": "ok"|"fail", "checks": [{"name", "ok", "detail"}, ...]}``. Before the worker exists
  (start-up) it is 200 with one check saying so: starting is alive.
* ``/readyz``: 200 when the worker does its job, 503 with the failing checks otherwise (also while it
  starts and while it stops).
* ``/``: the status page (HTML, :mod:`kcl_daemon.metrics.status_page`) and ``/status.json`` (the same
  data): built from a :class:`StatusSource` when a request comes, never in between; 503 while the worker
  is being built. A Prometheus scraper configured for ``/`` (it accepts the exposition formats, not
  HTML) still gets the metrics there.
* anything else: ``prometheus_client``'s exposition of the registry.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from socketserver import ThreadingMixIn
from typing import Any, Protocol
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import orjson
from prometheus_client import make_wsgi_app

from kcl_daemon.core.worker.health import Check, HealthReport
from kcl_daemon.core.worker.status import StatusSnapshot
from kcl_daemon.errors import ConfigError
from kcl_daemon.metrics.registry import DaemonMetrics
from kcl_daemon.metrics.status_page import render_html, render_json

logger = logging.getLogger(__name__)

HEALTHZ = "/healthz"
READYZ = "/readyz"
STATUS_PAGE = "/"
STATUS_JSON = "/status.json"
#: the page runs no script and loads nothing: its own inline style is all it may use
_PAGE_HEADERS = [
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'self'"),
]

Environ = dict[str, Any]
StartResponse = Callable[..., Any]


class HealthSource(Protocol):
    """What the worker answers (called on the server's threads; must not need the event loop)."""

    def liveness(self) -> HealthReport: ...

    def readiness(self) -> HealthReport: ...


class StatusSource(Protocol):
    """The worker's status page data (called on the server's threads; must not need the event loop)."""

    def snapshot(self) -> StatusSnapshot: ...


_STARTING_LIVE = HealthReport((Check("started", True, "starting: the worker is being built"),))
_STARTING_READY = HealthReport((Check("started", False, "starting: the worker is being built"),))


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Probes every few seconds would flood the log."""


@dataclass(slots=True)
class PrometheusEndpoint:
    server: WSGIServer
    host: str
    #: set once the worker exists; until then /healthz says "starting" (200) and /readyz 503
    health: HealthSource | None = None
    #: set once the worker exists; until then ``/`` and ``/status.json`` answer 503 "starting"
    status: StatusSource | None = None
    _thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def health_response(report: HealthReport) -> tuple[str, bytes]:
    """The HTTP status line and JSON body of one health answer."""
    status = "200 OK" if report.ok else "503 Service Unavailable"
    return status, orjson.dumps(report.as_json(), option=orjson.OPT_INDENT_2) + b"\n"


def status_response(path: str, source: StatusSource | None) -> tuple[str, str, bytes]:
    """The HTTP status line, content type and body of ``/`` or ``/status.json``."""
    is_json = path == STATUS_JSON
    if source is None:
        if is_json:
            return "503 Service Unavailable", "application/json", b'{"status": "starting"}\n'
        body = b'<!doctype html><meta http-equiv="refresh" content="2"><title>kcl-daemon</title>'
        return (
            "503 Service Unavailable",
            "text/html; charset=utf-8",
            body + b"<p>The worker is starting.</p>\n",
        )
    snapshot = source.snapshot()
    if is_json:
        return "200 OK", "application/json", render_json(snapshot)
    return "200 OK", "text/html; charset=utf-8", render_html(snapshot)


def _status_app(
    environ: Environ, start_response: StartResponse, status: Callable[[], StatusSource | None]
) -> Iterable[bytes]:
    path = environ.get("PATH_INFO", "")
    method = environ.get("REQUEST_METHOD", "GET")
    if method not in ("GET", "HEAD"):
        start_response("405 Method Not Allowed", [("Allow", "GET, HEAD"), ("Content-Length", "0")])
        return [b""]
    try:
        line, content_type, body = status_response(path, status())
    except Exception:  # a bug in the page must answer, not hang the browser
        logger.exception("status page %s failed", path)
        line, content_type, body = "500 Internal Server Error", "text/plain", b"the status page failed\n"
    headers = [("Content-Type", content_type), ("Content-Length", str(len(body))), *_PAGE_HEADERS]
    start_response(line, headers)
    return [b"" if method == "HEAD" else body]


def _scraper(environ: Environ) -> bool:
    """A Prometheus scraper pointed at ``/`` (it asks for the exposition formats and not for HTML) still
    gets the metrics there; browsers, text browsers and ``curl`` get the page."""
    accept = str(environ.get("HTTP_ACCEPT", ""))
    return ("openmetrics-text" in accept or "text/plain" in accept) and "text/html" not in accept


def make_app(
    metrics_app: Callable[[Environ, StartResponse], Iterable[bytes]],
    health: Callable[[], HealthSource | None],
    status_source: Callable[[], StatusSource | None] = lambda: None,
) -> Callable[[Environ, StartResponse], Iterable[bytes]]:
    """The WSGI app: the status page, the two health paths, and the metrics app for everything else."""

    def app(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == STATUS_JSON or (path == STATUS_PAGE and not _scraper(environ)):
            return _status_app(environ, start_response, status_source)
        if path not in (HEALTHZ, READYZ):
            return metrics_app(environ, start_response)
        source = health()
        try:
            if path == HEALTHZ:
                report = _STARTING_LIVE if source is None else source.liveness()
            else:
                report = _STARTING_READY if source is None else source.readiness()
        except Exception as exc:  # a bug in a check must answer, not hang the probe
            logger.exception("health check %s failed", path)
            report = HealthReport((Check("health-check", False, f"the check itself failed: {exc!r}"),))
        status, body = health_response(report)
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        start_response(status, headers)
        return [body]

    return app


def serve(metrics: DaemonMetrics, port: int, host: str = "127.0.0.1") -> PrometheusEndpoint:
    """Serve ``/metrics``, ``/healthz``, ``/readyz`` and the status page on ``host:port`` (port 0: any
    free port); ConfigError if that is impossible."""
    holder: list[PrometheusEndpoint] = []
    app = make_app(
        make_wsgi_app(metrics.registry),
        lambda: holder[0].health if holder else None,
        lambda: holder[0].status if holder else None,
    )
    server_class = _Server6 if ":" in host else _Server
    try:
        server = make_server(host, port, app, server_class, handler_class=_QuietHandler)
    except OSError as exc:
        raise ConfigError(
            [f"--metrics-port: cannot listen on {host}:{port}: {exc.strerror or exc}"]
        ) from None
    endpoint = PrometheusEndpoint(server, host)
    holder.append(endpoint)
    thread = threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True)
    endpoint._thread = thread
    thread.start()
    logger.info(
        "metrics: Prometheus endpoint on %s (status page: %s/, health: %s%s, %s%s)",
        endpoint.url,
        endpoint.base_url,
        endpoint.base_url,
        HEALTHZ,
        endpoint.base_url,
        READYZ,
    )
    return endpoint
