"""A fleet of kcl-daemon processes and real Java MultiLangDaemons on one table, for the mixed tests.

:class:`MixedFleet` starts either kind with the recording processor (one records file for all), keeps
records coming while it waits (20 a second), and says who holds which lease.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.integration.java_daemon import H2cProxy, JavaDaemon
from tests.integration.test_daemon_e2e import Fleet, data_of, owners, put
from tests.support.emulators import Backend

FAILOVER_MS = 3000


class PyFleet(Fleet):
    extra = ""

    def properties(self, worker: str, executable: str) -> Path:
        path = super().properties(worker, executable)
        text = path.read_text().replace("failoverTimeMillis = 2000", f"failoverTimeMillis = {FAILOVER_MS}")
        path.write_text(text + self.extra)
        return path


class MixedFleet:
    def __init__(
        self,
        tmp_path: Path,
        backend: Backend,
        clients: AwsClients,
        table: DynamoLeaseTable,
        stream: str,
        *,
        java_version: int,
        py_extra: str,
        java_extra: str = "",
    ) -> None:
        self.py = PyFleet(tmp_path, backend, table.table_name, stream)
        self.py.extra = py_extra
        self.proxy = H2cProxy(backend.kinesis_endpoint, tmp_path / "h2c.log")
        self.javas: dict[str, JavaDaemon] = {}
        self.sent = 0
        self._tmp = tmp_path
        self._backend = backend
        self._clients = clients
        self._table = table
        self._java_version = java_version
        self._java_extra = java_extra

    def java(self, name: str) -> JavaDaemon:
        daemon = JavaDaemon(
            name,
            self._java_version,
            self._tmp,
            table=self.py.table,
            stream=self.py.stream,
            kinesis_endpoint=self.proxy.endpoint,
            dynamodb_endpoint=self._backend.dynamodb_endpoint,
            records=self.py.records,
            failover_ms=FAILOVER_MS,
            extra=self._java_extra,
        )
        self.javas[name] = daemon
        return daemon

    def owners(self) -> dict[str, int]:
        return owners(self._table)

    def spread(self) -> list[tuple[str, int]]:
        return sorted(self.owners().items())

    def more(self, n: int = 200) -> None:
        put(self._clients, self.py.stream, range(self.sent, self.sent + n))
        self.sent += n

    def workers_seen(self) -> set[str]:
        return {row["worker"] for row in self.py.recorded()}

    def all_delivered(self) -> bool:
        return data_of(self.py.recorded()) >= {f"record-{i}" for i in range(self.sent)}

    def logs(self) -> str:
        return self.py.logs() + "".join(f"\n--- {j.name} ---\n{j.tail()}" for j in self.javas.values())

    def wait(self, check: Callable[[], bool], limit_s: float, what: str) -> float:
        """Wait for ``check`` while records keep coming (20 every second)."""
        start = last_put = time.monotonic()
        while not check():
            if time.monotonic() - start > limit_s:
                raise AssertionError(f"{what}: not within {limit_s}s\n{self.logs()}")
            for java in self.javas.values():
                if java.process.poll() not in (None, -signal.SIGKILL, 0):
                    raise AssertionError(f"{java.name} exited with {java.process.returncode}\n{java.tail()}")
            if time.monotonic() - last_put >= 1.0:
                self.more(20)
                last_put = time.monotonic()
            time.sleep(0.2)
        return time.monotonic() - start

    def check_logs(self) -> None:
        for daemon in self.javas.values():
            assert daemon.errors() == [], daemon.tail()
        for daemon in self.py.daemons.values():
            text = daemon.log.read_text()
            assert "skipping" not in text and " ERROR " not in text, text[-3000:]

    def close(self) -> None:
        for java in self.javas.values():
            java.stop(signal.SIGKILL, 10)
        self.py.close()
        self.proxy.stop()
