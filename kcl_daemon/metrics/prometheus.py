"""The Prometheus endpoint: ``prometheus_client``'s HTTP server on a daemon thread, 127.0.0.1 by default."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import start_http_server

from kcl_daemon.errors import ConfigError
from kcl_daemon.metrics.registry import DaemonMetrics

logger = logging.getLogger(__name__)


class _Server(Protocol):
    server_port: int

    def shutdown(self) -> None: ...

    def server_close(self) -> None: ...


@dataclass(slots=True)
class PrometheusEndpoint:
    server: _Server
    host: str

    @property
    def port(self) -> int:
        return self.server.server_port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(metrics: DaemonMetrics, port: int, host: str = "127.0.0.1") -> PrometheusEndpoint:
    """Serve ``/metrics`` on ``host:port`` (port 0: any free port); ConfigError if that is impossible."""
    try:
        server, _thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise ConfigError(
            [f"--metrics-port: cannot listen on {host}:{port}: {exc.strerror or exc}"]
        ) from None
    endpoint = PrometheusEndpoint(server, host)
    logger.info("metrics: Prometheus endpoint on %s", endpoint.url)
    return endpoint
