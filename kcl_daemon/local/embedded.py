"""An in-process moto server on 127.0.0.1 serving Kinesis and DynamoDB, for runs with no AWS account.

:class:`EmbeddedBackend` runs moto's ``ThreadedMotoServer`` on a free loopback port, in a thread of this
process, and stops it on exit. moto serves both services on one port and routes each request by the
service named in its SigV4 signature, so ``kinesis_endpoint`` and ``dynamodb_endpoint`` are the same URL.

Rules it keeps:

* It binds to 127.0.0.1 only, never to every interface.
* The dummy credentials are handed only to the clients it builds (:meth:`EmbeddedBackend.build_clients`);
  the process environment is never changed, so record-processor children never inherit them.
* moto keeps its data in module-level state: every backend started in one process sees the same streams
  and tables, and the data lives until the process exits.
* moto is an optional dependency (the ``local`` extra); without it, :meth:`start` raises
  :class:`LocalBackendUnavailable` naming the install command.
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Final, Self

from kcl_daemon.aws.clients import AwsClients, ClientSettings
from kcl_daemon.aws.provision import StaticCredentials, build_clients_with_credentials, close_clients
from kcl_daemon.errors import KclError

if TYPE_CHECKING:
    from moto.server import ThreadedMotoServer

logger = logging.getLogger(__name__)

LOOPBACK: Final = "127.0.0.1"
DEFAULT_REGION: Final = "us-east-1"
# Any key pair works with moto; these are recognisably fake in logs and in the backend's own requests.
LOCAL_CREDENTIALS: Final = StaticCredentials("kcl-daemon-local", "kcl-daemon-local-secret")
INSTALL_HINT: Final = "pip install 'kcl-daemon[local]'"


class LocalBackendUnavailable(KclError):
    """The embedded backend cannot run: moto is not installed, or its server did not start."""


class _DropAccessLog(logging.Filter):
    """Drops werkzeug's per-request INFO lines ("POST / HTTP/1.1" 200) while a backend runs; every
    request the daemon makes would otherwise be logged. Warnings and errors still pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


class EmbeddedBackend:
    """moto's Kinesis + DynamoDB on ``127.0.0.1:<free port>``, for as long as the context is open.

    ::

        with EmbeddedBackend() as backend:
            clients = backend.build_clients()
            ...
    """

    def __init__(self, *, region: str = DEFAULT_REGION, port: int = 0) -> None:
        """``port=0`` (the default) lets the OS pick a free port when the server binds, with no race."""
        self.region = region
        self.credentials = LOCAL_CREDENTIALS
        self._requested_port = port
        self._server: ThreadedMotoServer | None = None
        self._endpoint: str | None = None
        self._clients: list[AwsClients] = []
        self._access_log_filter = _DropAccessLog()
        self._lock = threading.Lock()
        self.startup_s: float | None = None
        """Seconds from :meth:`start` until the server accepted connections (moto's import included)."""

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Import moto, bind the server to 127.0.0.1 and serve on a background thread. Not re-entrant."""
        with self._lock:
            if self._server is not None:
                raise RuntimeError("the embedded backend is already running")
            started = time.monotonic()
            try:
                from moto.server import ThreadedMotoServer  # imported here: moto is an optional extra
            except ImportError as exc:
                raise LocalBackendUnavailable(
                    f"the embedded local backend needs moto's server; install it with: {INSTALL_HINT}"
                ) from exc
            logging.getLogger("werkzeug").addFilter(self._access_log_filter)
            server = ThreadedMotoServer(ip_address=LOOPBACK, port=self._requested_port, verbose=False)
            try:
                server.start()
                host, port = server.get_host_and_port()
            except OSError as exc:
                logging.getLogger("werkzeug").removeFilter(self._access_log_filter)
                raise LocalBackendUnavailable(
                    f"could not start moto on {LOOPBACK}:{self._requested_port}: {exc}"
                ) from exc
            self._server = server
            self._endpoint = f"http://{host}:{port}"
            self.startup_s = time.monotonic() - started
        logger.info("embedded Kinesis + DynamoDB (moto) listening on %s", self._endpoint)

    def stop(self) -> None:
        """Close the clients this backend built, shut the server down, join its thread. Idempotent."""
        with self._lock:
            server, self._server = self._server, None
            clients, self._clients = self._clients, []
            if server is None:
                return
            for built in clients:
                close_clients(built)
            server.stop()  # shutdown() + join; werkzeug closes the listening socket on its way out
            logging.getLogger("werkzeug").removeFilter(self._access_log_filter)
        logger.info("embedded backend at %s stopped", self._endpoint)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    # -- what callers need -------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``; raises if the backend has not been started."""
        if self._endpoint is None:
            raise RuntimeError("the embedded backend has not been started")
        return self._endpoint

    @property
    def kinesis_endpoint(self) -> str:
        return self.endpoint

    @property
    def dynamodb_endpoint(self) -> str:
        return self.endpoint

    @property
    def port(self) -> int:
        return int(self.endpoint.rsplit(":", 1)[1])

    def client_settings(self, base: ClientSettings | None = None) -> ClientSettings:
        """``base`` (timeouts, pool size, attempts) pointed at this backend's endpoints and region."""
        base = base or ClientSettings(region=self.region)
        return ClientSettings(
            region=self.region,
            kinesis_endpoint=self.kinesis_endpoint,
            dynamodb_endpoint=self.dynamodb_endpoint,
            connect_timeout_s=base.connect_timeout_s,
            read_timeout_s=base.read_timeout_s,
            max_pool_connections=base.max_pool_connections,
            max_attempts=base.max_attempts,
            lease_keeper_timeout_s=base.lease_keeper_timeout_s,
        )

    def build_clients(self, base: ClientSettings | None = None) -> AwsClients:
        """Clients for this backend, signed with the dummy credentials; closed by :meth:`stop`."""
        clients = build_clients_with_credentials(self.client_settings(base), self.credentials)
        with self._lock:
            if self._server is None:
                close_clients(clients)
                raise RuntimeError("the embedded backend is not running")
            self._clients.append(clients)
        return clients
