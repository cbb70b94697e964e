"""Emulators for the integration tests: moto_server, and kinesalite + dynalite, on 127.0.0.1 only.

Each emulator starts once per session on a free port, is ready when a real signed API call answers, and
is stopped by PID at the end; one that dies (or stops answering) is restarted on the same port before the
next test (``emulators.py``), and the restarts are listed at the end of the run. ``backend`` is
parametrized, so every test using it runs against both ("moto" and "kinesalite+dynalite"). Dummy
credentials are set in the environment here and nowhere else. Missing node/npm packages/moto_server:
skip locally, fail under CI.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import boto3
import pytest
from botocore.config import Config

from kcl_daemon.aws.clients import AwsClients, ClientSettings, build_clients
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.integration.emulators import Emulator, EmulatorError

REPO = Path(__file__).resolve().parents[2]
NODE_MODULES = REPO / ".cache" / "node" / "node_modules"
MOTO_SERVER = REPO / ".venv" / "bin" / "moto_server"
LOOPBACK = Path(__file__).with_name("kinesalite_loopback.js")
SURVIVE_ABORTS = Path(__file__).with_name("survive_aborted_requests.js")  # see its header
REGION = "us-east-1"

STARTUP_TIMES: dict[str, float] = {}
RESTARTS: list[str] = []


class Backend(NamedTuple):
    name: str
    kinesis_endpoint: str
    dynamodb_endpoint: str


def _missing(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _require_node() -> str:
    node = shutil.which("node")
    if node is None:
        _missing("node is not installed (scripts/bootstrap.sh installs it)")
    assert node is not None
    for package in ("kinesalite", "dynalite", "minimist"):
        if not (NODE_MODULES / package).is_dir():
            _missing(f"npm package {package} is missing under {NODE_MODULES} (scripts/bootstrap.sh)")
    return node


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_PROBE_CONFIG = Config(connect_timeout=1, read_timeout=2, retries={"total_max_attempts": 1})


def _probe_dynamodb(endpoint: str) -> None:
    session = boto3.session.Session(region_name=REGION)
    session.client("dynamodb", endpoint_url=endpoint, config=_PROBE_CONFIG).list_tables()


def _probe_kinesis(endpoint: str) -> None:
    session = boto3.session.Session(region_name=REGION)
    session.client("kinesis", endpoint_url=endpoint, config=_PROBE_CONFIG).list_streams()


EMULATORS: list[Emulator] = []  # started so far in this session, checked around every test


def _run_emulator(
    name: str, argv: list[str], port: int, probes: list[Callable[[str], None]], log_dir: Path
) -> Iterator[str]:
    """Start ``argv``, wait until every probe answers, yield the endpoint, stop the process by PID."""
    emulator = Emulator(name, argv, port, probes, log_dir / f"{name}.log")
    try:
        emulator.start()
    except EmulatorError as exc:
        pytest.fail(str(exc))
    STARTUP_TIMES[name] = emulator.startup_s
    EMULATORS.append(emulator)
    try:
        yield emulator.endpoint
    finally:
        EMULATORS.remove(emulator)
        emulator.stop()
        RESTARTS.extend(emulator.restarts)


@pytest.fixture(autouse=True)
def _emulators_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """Before and after every test: an emulator that died (or stopped answering) is restarted on its
    port, so one test that crashes it cannot fail the rest of the session."""
    for emulator in list(EMULATORS):
        emulator.ensure_alive(f"found before {request.node.nodeid}")
    yield
    for emulator in list(EMULATORS):
        emulator.ensure_alive(f"found after {request.node.nodeid}")


@pytest.fixture(scope="session")
def aws_env() -> Iterator[None]:
    """Dummy credentials and region for boto3's default chain, for the whole session."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ACCESS_KEY_ID", "test")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "test")
        patch.setenv("AWS_DEFAULT_REGION", REGION)
        patch.setenv("AWS_REGION", REGION)
        patch.delenv("AWS_SESSION_TOKEN", raising=False)
        patch.delenv("AWS_PROFILE", raising=False)
        yield


@pytest.fixture(scope="session")
def emulator_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("emulators")


@pytest.fixture(scope="session")
def moto_endpoint(aws_env: None, emulator_logs: Path) -> Iterator[str]:
    if not MOTO_SERVER.exists():
        _missing(f"moto_server is missing at {MOTO_SERVER} (pip install -e '.[dev]')")
    port = _free_port()
    argv = [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)]
    yield from _run_emulator("moto_server", argv, port, [_probe_dynamodb, _probe_kinesis], emulator_logs)


@pytest.fixture(scope="session")
def kinesalite_endpoint(aws_env: None, emulator_logs: Path) -> Iterator[str]:
    node = _require_node()
    port = _free_port()
    argv = [node, "--require", str(SURVIVE_ABORTS), str(LOOPBACK), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--createStreamMs", "0", "--deleteStreamMs", "0", "--updateStreamMs", "0", "--shardLimit", "100"]
    yield from _run_emulator("kinesalite", argv, port, [_probe_kinesis], emulator_logs)


@pytest.fixture(scope="session")
def dynalite_endpoint(aws_env: None, emulator_logs: Path) -> Iterator[str]:
    node = _require_node()
    port = _free_port()
    argv = [node, "--require", str(SURVIVE_ABORTS), str(NODE_MODULES / "dynalite" / "cli.js")]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    argv += ["--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"]
    yield from _run_emulator("dynalite", argv, port, [_probe_dynamodb], emulator_logs)


@pytest.fixture(scope="session", params=["moto", "kinesalite+dynalite"])
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == "moto":
        endpoint = request.getfixturevalue("moto_endpoint")
        return Backend("moto", endpoint, endpoint)
    return Backend(
        "kinesalite+dynalite",
        request.getfixturevalue("kinesalite_endpoint"),
        request.getfixturevalue("dynalite_endpoint"),
    )


@pytest.fixture(scope="session")
def aws_clients(backend: Backend) -> AwsClients:
    settings = ClientSettings(
        region=REGION,
        kinesis_endpoint=backend.kinesis_endpoint,
        dynamodb_endpoint=backend.dynamodb_endpoint,
    )
    return build_clients(settings)


@pytest.fixture
def lease_table(aws_clients: AwsClients) -> Iterator[DynamoLeaseTable]:
    """A fresh lease table (with its GSI) per test, deleted afterwards."""
    table = DynamoLeaseTable(aws_clients.dynamodb, f"leases-{uuid.uuid4().hex[:12]}")
    assert table.create_table_if_missing(wait_s=10, poll_s=0.02)
    yield table
    aws_clients.dynamodb.delete_table(TableName=table.table_name)


@pytest.fixture
def kinesis(aws_clients: AwsClients) -> Kinesis:
    return Kinesis(aws_clients.kinesis)


def wait_for_stream(clients: AwsClients, name: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while (
        clients.kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamStatus"]
        != "ACTIVE"
    ):
        assert time.monotonic() < deadline, f"stream {name} never became ACTIVE"
        time.sleep(0.02)


@pytest.fixture
def make_stream(aws_clients: AwsClients) -> Iterator[Callable[[int], str]]:
    """``make_stream(shard_count)`` creates an ACTIVE stream and returns its name; deleted afterwards."""
    names: list[str] = []

    def make(shard_count: int) -> str:
        name = f"stream-{uuid.uuid4().hex[:10]}"
        aws_clients.kinesis.create_stream(StreamName=name, ShardCount=shard_count)
        names.append(name)
        wait_for_stream(aws_clients, name)
        return name

    yield make
    for name in names:
        aws_clients.kinesis.delete_stream(StreamName=name)


#: Figures the lease-fleet tests measured, printed at the end of the run: name -> text.
FIGURES: dict[str, str] = {}


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if STARTUP_TIMES:
        times = ", ".join(f"{name} {seconds:.2f}s" for name, seconds in STARTUP_TIMES.items())
        terminalreporter.write_line(f"emulator startup: {times}")
    for note in RESTARTS + [note for emulator in EMULATORS for note in emulator.restarts]:
        terminalreporter.write_line(f"emulator restart: {note}")
    for name, text in FIGURES.items():
        terminalreporter.write_line(f"{name}: {text}")


@pytest.fixture(scope="session")
def spark_session(aws_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One local[2] SparkSession for every Spark test, with the Kinesis source registered.

    Skipped (with the reason) where Java is missing; pyspark missing fails under CI like any emulator.
    """
    if shutil.which("java") is None:
        pytest.skip("the Spark tests need a Java 17 runtime (java is not on PATH)")
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        _missing("pyspark is not installed (scripts/bootstrap.sh installs kcl-daemon[spark])")
    from kcl_daemon.spark import register

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers use this venv's packages
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kcl-daemon-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    yield spark
    spark.stop()
