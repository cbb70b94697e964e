"""`kcl-daemon` processes for tests of the operator surface (health endpoints, checkpoint rewinds): each one
is ``python -m kcl_daemon run --properties FILE`` with the recording processor, its endpoints in the
properties, dummy credentials in the environment, optionally ``--metrics-port``; plus the helpers to
read what the processor recorded and to ask the health endpoints.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.support.emulators import Backend, free_port
from tests.support.paths import RECORDER


def properties_text(
    backend: Backend,
    *,
    application: str,
    stream: str,
    worker: str,
    dynamodb_endpoint: str | None = None,
    extra: Mapping[str, object] | None = None,
) -> str:
    """A small daemon's properties: fast timings, TRIM_HORIZON, the recording processor."""
    keys: dict[str, object] = {
        "executableName": f"{sys.executable} {RECORDER}",
        "applicationName": application,
        "streamName": stream,
        "regionName": "us-east-1",
        "kinesisEndpoint": backend.kinesis_endpoint,
        "dynamoDBEndpoint": dynamodb_endpoint or backend.dynamodb_endpoint,
        "workerId": worker,
        "initialPositionInStream": "TRIM_HORIZON",
        "idleTimeBetweenReadsInMillis": 200,
        "failoverTimeMillis": 2000,
        "parentShardPollIntervalMillis": 500,
        "shardSyncIntervalMillis": 5000,
        "shutdownGraceMillis": 10000,
        "childStopTimeoutMillis": 2000,
        "workerMetricsReporterFreqInMillis": 1000,
        "metricsLevel": "NONE",
        "retrievalMode": "POLLING",
        **(extra or {}),
    }
    return "".join(f"{key} = {value}\n" for key, value in keys.items())


class Daemon:
    """One daemon process; its log is kept in ``log``."""

    def __init__(
        self,
        name: str,
        properties: Path,
        records: Path,
        *,
        metrics_port: int | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.log = properties.with_suffix(".log")
        self.metrics_port = metrics_port
        argv = [sys.executable, "-m", "kcl_daemon", "run", "--properties", str(properties)]
        if metrics_port is not None:
            argv += ["--metrics-port", str(metrics_port)]
        environment = {**os.environ, "KCL_TEST_RECORDS": str(records), "KCL_TEST_WORKER": name, **(env or {})}
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment
            )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}"

    def health(self, path: str) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) of ``/healthz`` or ``/readyz``; (0, {}) while nothing listens."""
        try:
            with urllib.request.urlopen(f"{self.base_url}{path}", timeout=5) as response:  # noqa: S310
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())
        except OSError:
            return 0, {}

    def stop(self, timeout_s: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"{self.name} did not stop within {timeout_s}s:\n{self.tail()}") from None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def start_daemon(
    tmp_path: Path,
    backend: Backend,
    *,
    application: str,
    stream: str,
    worker: str,
    metrics: bool = False,
    dynamodb_endpoint: str | None = None,
    extra: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
) -> Daemon:
    path = tmp_path / f"{worker}.properties"
    path.write_text(
        properties_text(
            backend,
            application=application,
            stream=stream,
            worker=worker,
            dynamodb_endpoint=dynamodb_endpoint,
            extra=extra,
        )
    )
    return Daemon(
        worker, path, tmp_path / "records.jsonl", metrics_port=free_port() if metrics else None, env=env
    )


def recorded(records: Path, event: str = "record") -> list[dict[str, Any]]:
    if not records.exists():
        return []
    lines = [json.loads(line) for line in records.read_text().splitlines() if line]
    return [line for line in lines if line["event"] == event]


def wait_for(check: Callable[[], bool], limit_s: float, what: str, *daemons: Daemon) -> float:
    """Poll ``check`` every 0.1 s; fail naming ``what`` (with the daemons' logs) after ``limit_s``, or as
    soon as a daemon exits."""
    start = time.monotonic()
    while not check():
        for daemon in daemons:
            if daemon.process.poll() is not None:
                raise AssertionError(
                    f"{daemon.name} exited with {daemon.process.returncode}\n{daemon.tail()}"
                )
        if time.monotonic() - start > limit_s:
            logs = "\n".join(f"--- {d.name} ---\n{d.tail()}" for d in daemons)
            raise AssertionError(f"{what}: not within {limit_s}s\n{logs}")
        time.sleep(0.1)
    return time.monotonic() - start


def failing_checks(body: Mapping[str, Any]) -> dict[str, str]:
    return {check["name"]: check["detail"] for check in body.get("checks", []) if not check["ok"]}
