"""Runs the real Java MultiLangDaemon (KCL 3.1.3 or 2.5.8) against the emulators, for mixed fleets.

The jars come from ``scripts/install_java_kcl.sh`` (``.cache/java-kcl-3``, ``.cache/java-kcl-2``). The
Java SDK speaks HTTP/2 to Kinesis, which the emulators do not: :class:`H2cProxy` (``tests/java/
h2c_proxy.js``) forwards it as HTTP/1.1. The properties are the ones ``java-mld.md`` lists as needed
(polling, CBOR off, metrics off, dummy credentials from the environment). Its child is the same
recording processor the kcl-daemon workers run, so records from both land in one file.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JARS = {
    3: REPO / ".cache" / "java-kcl-3" / "amazon_kclpy" / "jars",
    2: REPO / ".cache" / "java-kcl-2" / "amazon_kclpy" / "jars",
}
H2C_PROXY = REPO / "tests" / "support" / "js" / "h2c_proxy.js"
RECORDER = REPO / "tests" / "fixtures" / "children" / "recording_processor.py"
MAIN_CLASS = "software.amazon.kinesis.multilang.MultiLangDaemon"


def missing(version: int) -> str | None:
    """Why the Java daemon cannot run here, or None."""
    if shutil.which("java") is None:
        return "java is not installed"
    if shutil.which("node") is None:
        return "node is not installed (the h2c proxy)"
    if not JARS[version].is_dir():
        return f"{JARS[version]} is missing (scripts/install_java_kcl.sh)"
    return None


class H2cProxy:
    """``node tests/java/h2c_proxy.js``: HTTP/2 prior knowledge on 127.0.0.1 -> HTTP/1.1 upstream."""

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
    ) -> None:
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
        properties.write_text(
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
            "idleTimeBetweenReadsInMillis = 200\n"
            f"failoverTimeMillis = {failover_ms}\n"
            "shardSyncIntervalMillis = 5000\n"
            "parentShardPollIntervalMillis = 500\n"
            "metricsLevel = NONE\n"
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
        argv = ["java", "-Xmx256m", "-Daws.cborEnabled=false", "-cp", f"{JARS[version]}/*", MAIN_CLASS]
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


def wait_until(check: object, limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False
