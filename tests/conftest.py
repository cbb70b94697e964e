"""Fixtures of every layer, and the layout rule: a test's directory and its markers agree.

The emulators (``tests.support.emulators``) start once per session on free loopback ports, only when a
test asks for one, are checked around every test (one that died is restarted on its port) and are
stopped by PID at the end; start-up times, restarts and the figures tests measured are printed at the
end of the run. ``backend`` is parametrized, so every test using it runs against both ("moto" and
"kinesalite+dynalite"). Dummy credentials are set in the environment here and nowhere else. A missing
node, npm package or moto_server skips locally and fails under CI. Under ``--dist loadfile`` the
pytest-xdist workers get the test files longest first (``tests.support.schedule``).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support import botocore_models, hypothesis_profiles
from tests.support.emulators import (
    DUMMY_ENV,
    REAL_ACCOUNT_ENV,
    RUNNING,
    Backend,
    Emulator,
    EmulatorError,
    EmulatorUnavailable,
)
from tests.support.figures import FIGURES
from tests.support.layout import misplaced
from tests.support.requirements import missing
from tests.support.schedule import make_scheduler
from tests.support.streams import wait_for_stream

# The thorough Hypothesis profile, without deadlines; make test-fast switches to the fast one
# (tests.support.hypothesis_profiles).
hypothesis_profiles.register()
# The sessions the tests build by the hundred parse botocore's models once per process, not once each.
botocore_models.share_loaders()

TESTS = Path(__file__).resolve().parent

STARTUP_TIMES: dict[str, float] = {}
RESTARTS: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test whose directory and markers disagree stops the run (tests.support.layout)."""
    wrong = [
        f"{item.nodeid}: {problem}"
        for item in items
        if item.path.is_relative_to(TESTS)
        for problem in misplaced(item.path.relative_to(TESTS), {mark.name for mark in item.iter_markers()})
    ]
    if wrong:
        raise pytest.UsageError("tests in the wrong layer (see docs/development.md):\n" + "\n".join(wrong))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under ``--dist loadfile`` (``make test``) the workers get the test files longest first, from the
    table of a recorded run (tests.support.schedule), so no long file starts last and runs alone."""
    return make_scheduler(config, log)


def _run_emulator(emulator: Emulator) -> Iterator[str]:
    """Start ``emulator``, yield its endpoint, stop the process by PID."""
    try:
        emulator.start()
    except EmulatorError as exc:
        pytest.fail(str(exc))
    STARTUP_TIMES[emulator.name] = emulator.startup_s
    RUNNING.append(emulator)
    try:
        yield emulator.endpoint
    finally:
        RUNNING.remove(emulator)
        emulator.stop()
        RESTARTS.extend(emulator.restarts)


def _emulator(make: Callable[[], Emulator]) -> Emulator:
    try:
        return make()
    except EmulatorUnavailable as exc:
        missing(str(exc))


@pytest.fixture(autouse=True)
def _emulators_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """Before and after every test: an emulator that died (or stopped answering) is restarted on its
    port, so one test that crashes it cannot fail the rest of the session."""
    for emulator in list(RUNNING):
        emulator.ensure_alive(f"found before {request.node.nodeid}")
    yield
    for emulator in list(RUNNING):
        emulator.ensure_alive(f"found after {request.node.nodeid}")


@pytest.fixture(scope="session")
def aws_env() -> Iterator[None]:
    """Dummy credentials and region for boto3's default chain, for the whole session."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in DUMMY_ENV.items():
            patch.setenv(name, value)
        for name in REAL_ACCOUNT_ENV:
            patch.delenv(name, raising=False)
        yield


@pytest.fixture(scope="session")
def emulator_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("emulators")


@pytest.fixture(scope="session")
def moto_endpoint(aws_env: None, emulator_logs: Path) -> Iterator[str]:
    yield from _run_emulator(_emulator(lambda: Emulator.moto_server(emulator_logs)))


@pytest.fixture(scope="session")
def kinesalite_endpoint(aws_env: None, emulator_logs: Path) -> Iterator[str]:
    yield from _run_emulator(_emulator(lambda: Emulator.kinesalite(emulator_logs)))


@pytest.fixture(scope="session")
def dynalite_endpoint(aws_env: None, emulator_logs: Path) -> Iterator[str]:
    yield from _run_emulator(_emulator(lambda: Emulator.dynalite(emulator_logs)))


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
    return backend.clients()


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


@pytest.fixture
def records_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the recording processor of an in-process worker writes ($KCL_TEST_RECORDS)."""
    path = tmp_path / "records.jsonl"
    monkeypatch.setenv("KCL_TEST_RECORDS", str(path))
    return path


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if STARTUP_TIMES:
        times = ", ".join(f"{name} {seconds:.2f}s" for name, seconds in STARTUP_TIMES.items())
        terminalreporter.write_line(f"emulator startup: {times}")
    for note in RESTARTS + [note for emulator in RUNNING for note in emulator.restarts]:
        terminalreporter.write_line(f"emulator restart: {note}")
    for name, text in FIGURES.items():
        terminalreporter.write_line(f"{name}: {text}")


@pytest.fixture(scope="session")
def spark_session(aws_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One SparkSession for every Spark test, on a real multi-process cluster: ``local-cluster[2,1,1024]``
    (two executor JVMs with their own Python workers; ``KCL_SPARK_MASTER`` overrides it, e.g. ``local[2]``),
    with ``format("kinesis")`` registered.

    Skipped (with the reason) where Java is missing; pyspark missing fails under CI like any emulator.
    """
    if shutil.which("java") is None:
        pytest.skip("the Spark tests need a Java 17 runtime (java is not on PATH)")
    try:
        import pyspark  # noqa: F401
    except ImportError:
        missing("pyspark is not installed (scripts/bootstrap.sh installs kcl-daemon[spark])")
    from tests.support.spark import session_master, start_session

    spark = start_session(
        session_master(), "kcl-daemon-tests", warehouse=tmp_path_factory.mktemp("spark-warehouse")
    )
    yield spark
    spark.stop()
