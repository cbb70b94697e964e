"""Shared pieces of the benchmarks that run whole daemons as processes: kcl-daemon and the Java
MultiLangDaemon 3.1.3, on the same properties and the same amazon_kclpy processor.

Not a benchmark itself: ``vs_java.py``, ``scaling.py`` and ``dynamodb_cost.py`` import it (``bench/`` is on
``sys.path`` when they run as scripts). It knows how to

* write one properties file that both daemons read the same way (:func:`properties`);
* start either daemon as a process with this checkout's code (:class:`DaemonProcess`), and stop it;
* measure a process and everything it started from /proc (:func:`sample`): CPU-seconds, RSS, threads,
  open file descriptors, and the RSS of its children;
* read the per-batch lines the benchmark processors append (:func:`read_batches`);
* run the h2c proxy the Java SDK needs in front of the Kinesis emulator (:func:`h2c_proxy`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

BENCH: Final = Path(__file__).resolve().parent
REPO: Final = BENCH.parent
NOOP_PROCESSOR: Final = BENCH / "kclpy_noop_processor.py"
WORKING_PROCESSOR: Final = BENCH / "kclpy_working_processor.py"
PROCESSORS: Final = {"noop": NOOP_PROCESSOR, "working": WORKING_PROCESSOR}
H2C_PROXY: Final = REPO / "tests" / "support" / "js" / "h2c_proxy.js"
DEFAULT_JARS: Final = REPO / ".cache" / "java-kcl-3" / "amazon_kclpy" / "jars"
JAVA_MAIN: Final = "software.amazon.kinesis.multilang.MultiLangDaemon"
TICKS: Final = os.sysconf("SC_CLK_TCK")
PAGE_KB: Final = os.sysconf("SC_PAGE_SIZE") // 1024


def java_jars(requested: Path | None = DEFAULT_JARS, *, disabled: bool = False) -> Path | None:
    """The KCL 3.1.3 jars when Java can run here (``pip install --no-deps --target .cache/java-kcl-3
    kclpy-ext==3.1.3.post4``), else None."""
    if disabled or requested is None or not requested.is_dir():
        return None
    if shutil.which("java") is None or shutil.which("node") is None:
        return None
    return requested


# -- /proc ------------------------------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process itself (its children not included)."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / TICKS


def _status(pid: int) -> dict[str, str]:
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        values[name] = value.strip()
    return values


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, their children, ...)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(_stat_fields(int(entry))[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _rss_mb(pid: int) -> float:
    """Resident set size from /proc/<pid>/statm (cheaper than status for hundreds of children)."""
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_KB / 1024


@dataclass(frozen=True, slots=True)
class Sample:
    """One look at a daemon process and its process tree."""

    at: float  # time.monotonic()
    cpu_s: float  # the daemon process's own utime + stime
    rss_mb: float  # the daemon's VmRSS
    peak_rss_mb: float  # the daemon's VmHWM
    threads: int
    fds: int
    children: int  # processes below the daemon
    children_rss_mb: float

    @property
    def total_rss_mb(self) -> float:
        return self.rss_mb + self.children_rss_mb


def sample(pid: int, *, with_children: bool = True) -> Sample:
    status = _status(pid)
    kids = descendants(pid) if with_children else []
    kids_rss = 0.0
    for kid in kids:
        with contextlib.suppress(OSError):
            kids_rss += _rss_mb(kid)
    return Sample(
        time.monotonic(),
        cpu_seconds(pid),
        int(status["VmRSS"].split()[0]) / 1024,
        int(status["VmHWM"].split()[0]) / 1024,
        int(status["Threads"]),
        len(os.listdir(f"/proc/{pid}/fd")),
        len(kids),
        kids_rss,
    )


# -- the batch lines the processors write ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchLine:
    shard: str
    start: float  # epoch seconds
    end: float
    records: int


class BatchLog:
    """Reads the lines the processors append (``<shard> <start> <end> <records>``), incrementally."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.batches: list[BatchLine] = []
        self.records = 0
        self.shards: set[str] = set()
        self._offset = 0
        self._partial = b""

    def poll(self) -> list[BatchLine]:
        """The batches logged since the last poll."""
        if not self.path.exists():
            return []
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        self._offset += len(data)
        data = self._partial + data
        *lines, self._partial = data.split(b"\n")
        new = []
        for line in lines:
            parts = line.split()
            if len(parts) != 4:
                continue
            batch = BatchLine(parts[0].decode(), float(parts[1]), float(parts[2]), int(parts[3]))
            new.append(batch)
            if batch.records:
                self.shards.add(batch.shard)
            self.records += batch.records
        self.batches.extend(new)
        return new


def read_batches(path: Path) -> list[BatchLine]:
    log = BatchLog(path)
    log.poll()
    return log.batches


def rate(batches: list[BatchLine]) -> float:
    """Records per second from the start of the first batch with records to the end of the last."""
    with_records = [b for b in batches if b.records]
    if not with_records:
        return 0.0
    window = max(b.end for b in with_records) - min(b.start for b in with_records)
    return sum(b.records for b in with_records) / window if window > 0 else float("nan")


# -- properties and processes ------------------------------------------------------------------------


def properties(
    *,
    processor: Path,
    stream: str,
    app: str,
    kinesis: str,
    dynamodb: str,
    java: bool,
    max_records: int = 10000,
    idle_ms: int = 200,
    failover_ms: int = 10000,
    extra: dict[str, str] | None = None,
) -> str:
    """One properties file both daemons read alike (Java's needs: polling, metrics off; java-mld.md)."""
    values = {
        "executableName": f"{sys.executable} {processor}",
        "streamName": stream,
        "applicationName": app,
        "regionName": "us-east-1",
        "kinesisEndpoint": kinesis,
        "dynamoDBEndpoint": dynamodb,
        "AwsCredentialsProvider": "DefaultCredentialsProvider",
        "initialPositionInStream": "TRIM_HORIZON",
        "retrievalMode": "POLLING",
        "maxRecords": str(max_records),
        "idleTimeBetweenReadsInMillis": str(idle_ms),
        "failoverTimeMillis": str(failover_ms),
        "shardSyncIntervalMillis": "5000",
    }
    if java:
        values["metricsLevel"] = "NONE"
    values.update(extra or {})
    return "".join(f"{key} = {value}\n" for key, value in values.items())


def daemon_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This checkout's code first on the path (the shared venv's editable install points elsewhere)."""
    path = os.pathsep.join(str(p) for p in (REPO, REPO / "protocol", REPO / "clients" / "python"))
    env = {**os.environ, "PYTHONPATH": path}
    env.setdefault("AWS_ACCESS_KEY_ID", "test")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    env.setdefault("AWS_REGION", "us-east-1")
    env.update(extra or {})
    return env


def daemon_argv(kind: str, properties_file: Path, jars: Path | None = None) -> list[str]:
    if kind == "java":
        assert jars is not None
        return [
            "java",
            "-Daws.cborEnabled=false",
            "-cp",
            f"{jars}/*",
            JAVA_MAIN,
            "--properties-file",
            str(properties_file),
        ]
    return [sys.executable, "-m", "kcl_daemon", "run", "--properties-file", str(properties_file)]


class DaemonProcess:
    """One daemon process (its output in ``log``); :meth:`stop` ends it with SIGTERM, then SIGKILL."""

    def __init__(self, argv: list[str], cwd: Path, log: Path, env: dict[str, str]) -> None:
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        self.pid = self.process.pid

    def check(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"the daemon exited with {self.process.returncode}; see {self.log}")

    def kill(self) -> None:
        """SIGKILL the daemon (a crash); its children see their stdin close."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def h2c_proxy(target: str) -> Iterator[str]:
    """``node tests/support/js/h2c_proxy.js``: HTTP/2 prior knowledge -> HTTP/1.1 for the Java SDK."""
    node = shutil.which("node")
    assert node is not None
    process = subprocess.Popen(
        [node, str(H2C_PROXY), "0", target], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode().split()
        if not line or line[0] != "ready":
            raise RuntimeError(f"h2c proxy did not start: {line}")
        yield f"http://127.0.0.1:{line[1]}"
    finally:
        process.terminate()
        process.wait(timeout=5)
        if process.stdout is not None:
            process.stdout.close()
