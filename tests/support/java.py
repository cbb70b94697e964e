"""The real Java MultiLangDaemon (KCL 3.5.1, 3.1.3 or 2.5.8) against the emulators, and mixed fleets of it and
kcl-daemon processes on one lease table.

The jars come from ``scripts/install_java_kcl.sh`` (``.cache/java-kcl-3``, ``.cache/java-kcl-2``, and
``.cache/java-kcl-35`` when the 3.5.1 build is beside the checkout, in ``../shared``). The
Java SDK speaks HTTP/2 to Kinesis, which the emulators do not: :class:`H2cProxy`
(``tests/support/js/h2c_proxy.js``) forwards it as HTTP/1.1. The properties are the ones ``java-mld.md``
lists as needed (polling, CBOR off, metrics off, dummy credentials from the environment). Its child is
the same recording processor the kcl-daemon workers run, so records from both land in one file.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend
from tests.support.fleet import Fleet, owners
from tests.support.paths import JS, RECORDER, REPO
from tests.support.recorder import data_of
from tests.support.streams import put

#: the jar directory of each Java KCL: 2 (2.5.8), 3 (3.1.3), 35 (3.5.1)
JARS = {
    3: REPO / ".cache" / "java-kcl-3" / "amazon_kclpy" / "jars",
    2: REPO / ".cache" / "java-kcl-2" / "amazon_kclpy" / "jars",
    35: REPO / ".cache" / "java-kcl-35",
}
#: where KCL 3.5.1 comes from: beside the checkout, not in it
JAVA35_SOURCE = REPO.parent / "shared" / "reference" / "java35"
H2C_PROXY = JS / "h2c_proxy.js"
#: how the JVM runs, never what KCL does: the client compiler only and the serial collector roughly halve
#: the CPU a daemon burns while it starts (6-8 s -> 3.6-4.6 s measured on 2 busy cores), which the other
#: test workers share; KCL's own timings and properties are untouched
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
MAIN_CLASS = "software.amazon.kinesis.multilang.MultiLangDaemon"


def unavailable(version: int) -> str | None:
    """Why the Java daemon cannot run here, or None."""
    if shutil.which("java") is None:
        return "java is not installed"
    if shutil.which("node") is None:
        return "node is not installed (the h2c proxy)"
    if version == 35 and not JAVA35_SOURCE.is_dir():
        return f"{JAVA35_SOURCE} is absent: KCL 3.5.1 is built beside the checkout, not shipped in it"
    if not JARS[version].is_dir():
        return f"{JARS[version]} is missing (scripts/install_java_kcl.sh)"
    return None


def skip_unless_java(backend: Backend, *versions: int) -> None:
    """Skip a mixed-fleet test on moto (one backend is enough: the Java daemons' start-up dominates the
    wall time) and where one of the Java ``versions`` cannot run here (:func:`unavailable`)."""
    if backend.name == "moto":
        pytest.skip("one backend is enough: the Java daemons' start-up dominates the wall time")
    for version in versions:
        why = unavailable(version)
        if why is not None:
            pytest.skip(why)


class H2cProxy:
    """``node tests/support/js/h2c_proxy.js``: HTTP/2 prior knowledge on 127.0.0.1 -> HTTP/1.1 upstream."""

    def __init__(self, upstream: str, log: Path) -> None:
        self._log = log.open("wb")
        node = shutil.which("node") or "node"
        self.process = subprocess.Popen(
            [node, str(H2C_PROXY), "0", upstream],
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode().split()
        if not line or line[0] != "ready":
            self.stop()
            raise RuntimeError(f"h2c proxy did not start: {line}")
        self.endpoint = f"http://127.0.0.1:{line[1]}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()


class JavaDaemon:
    def __init__(
        self,
        name: str,
        version: int,
        workdir: Path,
        *,
        table: str,
        stream: str,
        kinesis_endpoint: str,
        dynamodb_endpoint: str,
        records: Path,
        failover_ms: int = 3000,
        extra: str = "",
        on_defaults: bool = False,
    ) -> None:
        """``on_defaults``: only the keys the emulators need (no timing, no client version): the Java
        daemon as a user runs it."""
        self.name = name
        self.log = workdir / f"{name}.log"
        properties = workdir / f"{name}.properties"
        three_x = "clientVersionConfig = CLIENT_VERSION_CONFIG_3X\nworkerMetricsReporterFreqInMillis = 2000\n"
        client_version = "" if version == 2 else three_x
        # KCL before 2.7 names the SDK v1 providers (contract §8, trap 20)
        credentials = (
            "AWSCredentialsProvider = DefaultAWSCredentialsProviderChain\n"
            if version == 2
            else "AwsCredentialsProvider = DefaultCredentialsProvider\n"
        )
        needed = (
            f"executableName = {sys.executable} {RECORDER}\n"
            f"applicationName = {table}\n"
            f"streamName = {stream}\n"
            "regionName = us-east-1\n"
            f"kinesisEndpoint = {kinesis_endpoint}\n"
            f"dynamoDBEndpoint = {dynamodb_endpoint}\n"
            f"{credentials}"
            f"workerId = {name}\n"
            "initialPositionInStream = TRIM_HORIZON\n"
            "retrievalMode = POLLING\n"
            "metricsLevel = NONE\n"
        )
        properties.write_text(
            needed + extra
            if on_defaults
            else needed + "idleTimeBetweenReadsInMillis = 200\n"
            f"failoverTimeMillis = {failover_ms}\n"
            "shardSyncIntervalMillis = 5000\n"
            "parentShardPollIntervalMillis = 500\n"
            "shutdownGraceMillis = 5000\n" + client_version + extra
        )
        env = {
            **os.environ,
            "KCL_TEST_RECORDS": str(records),
            "KCL_TEST_WORKER": name,
            "AWS_ACCESS_KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID", "test"),
            "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
            "AWS_REGION": "us-east-1",
        }
        argv = [
            "java",
            "-Xmx256m",
            *JVM_OPTIONS,
            "-Daws.cborEnabled=false",
            "-cp",
            f"{JARS[version]}/*",
            MAIN_CLASS,
        ]
        argv += ["--properties-file", str(properties)]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=workdir
            )

    def stop(self, signum: int = signal.SIGTERM, timeout_s: float = 30.0) -> int | None:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def tail(self, lines: int = 80) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def errors(self) -> list[str]:
        """ERROR lines not caused by the children's stderr (which Java logs at ERROR)."""
        text = self.log.read_text(errors="replace").splitlines()
        return [
            line for line in text if " ERROR " in line and "Received error line from subprocess" not in line
        ]


#: the failoverTimeMillis of every daemon of a mixed fleet
FAILOVER_MS = 3000


class MixedFleet:
    """kcl-daemon processes (``py``) and Java daemons on one table with the recording processor (one
    records file for all); keeps records coming while it waits (20 a second) and says who holds which
    lease."""

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
        failover_ms: int = FAILOVER_MS,
    ) -> None:
        self.failover_ms = failover_ms
        self.py = Fleet(tmp_path, backend, table.table_name, stream, failover_ms=failover_ms, extra=py_extra)
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
            failover_ms=self.failover_ms,
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
