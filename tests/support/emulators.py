"""The AWS emulators on 127.0.0.1: moto_server, kinesalite and dynalite, started one way for every test and
benchmark.

Each :class:`Emulator` runs on a free loopback port it keeps for its whole life, is ready when a real
signed API call answers, and is stopped by its PID. kinesalite and dynalite died on a request whose client
vanished mid-body (a SIGKILLed daemon); they always run with ``js/survive_aborted_requests.js`` preloaded,
and :meth:`Emulator.ensure_alive` is the backstop for any other death: it restarts a dead or deaf process
on the same port (so endpoints handed out earlier stay valid) and records why. State is lost with the
process; every user creates its own streams and tables.

Tests get the emulators from the session fixtures of ``tests/conftest.py``; scripts (``bench/``) use
:func:`running_emulators`. Nothing here needs pytest.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

import boto3  # noqa: TID251 - the readiness probe is a raw signed call, one attempt
from botocore.config import Config  # noqa: TID251
from botocore.exceptions import BotoCoreError, ClientError  # noqa: TID251

from kcl_daemon.aws.clients import AwsClients, ClientSettings, build_clients
from tests.support.paths import JS, NODE_MODULES, VENV_BIN

REGION: Final = "us-east-1"
#: dummy credentials: the emulators check signatures' shape, never the keys
DUMMY_ENV: Final = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}
#: variables that would point boto3 at a real account instead of the dummy credentials
REAL_ACCOUNT_ENV: Final = ("AWS_SESSION_TOKEN", "AWS_PROFILE")
MOTO_SERVER: Final = VENV_BIN / "moto_server"
LOOPBACK: Final = JS / "kinesalite_loopback.js"  # kinesalite's own cli.js binds every interface
SURVIVE_ABORTS: Final = JS / "survive_aborted_requests.js"  # see its header
STARTUP_TIMEOUT_S: Final = 30.0


#: the emulators the test session has started and not yet stopped (tests/conftest.py checks them around
#: every test)
RUNNING: list[Emulator] = []


class EmulatorError(RuntimeError):
    """The emulator did not start (its log tail is in the message)."""


class EmulatorUnavailable(RuntimeError):
    """A program or npm package the emulator needs is not installed (scripts/bootstrap.sh installs it)."""


class Backend(NamedTuple):
    """Where a daemon finds Kinesis and DynamoDB: one moto_server, or kinesalite + dynalite."""

    name: str
    kinesis_endpoint: str
    dynamodb_endpoint: str

    def clients(self, **settings: Any) -> AwsClients:
        """The daemon's own clients for these endpoints (``settings``: more ClientSettings fields)."""
        return build_clients(
            ClientSettings(
                region=REGION,
                kinesis_endpoint=self.kinesis_endpoint,
                dynamodb_endpoint=self.dynamodb_endpoint,
                **settings,
            )
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_PROBE_CONFIG = Config(connect_timeout=1, read_timeout=2, retries={"total_max_attempts": 1})


def probe_dynamodb(endpoint: str) -> None:
    session = boto3.session.Session(region_name=REGION)
    session.client("dynamodb", endpoint_url=endpoint, config=_PROBE_CONFIG).list_tables()


def probe_kinesis(endpoint: str) -> None:
    session = boto3.session.Session(region_name=REGION)
    session.client("kinesis", endpoint_url=endpoint, config=_PROBE_CONFIG).list_streams()


def require_node() -> str:
    """The node binary, with kinesalite, dynalite and minimist under ``.cache/node``."""
    node = shutil.which("node")
    if node is None:
        raise EmulatorUnavailable("node is not installed (scripts/bootstrap.sh installs it)")
    for package in ("kinesalite", "dynalite", "minimist"):
        if not (NODE_MODULES / package).is_dir():
            raise EmulatorUnavailable(
                f"npm package {package} is missing under {NODE_MODULES} (scripts/bootstrap.sh)"
            )
    return node


class Emulator:
    """One emulator process on a fixed loopback port, restarted on that port if it dies."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        port: int,
        probes: Sequence[Callable[[str], None]],
        log_path: Path,
    ) -> None:
        self.name, self.argv, self.port, self.probes, self.log_path = name, list(argv), port, probes, log_path
        self.endpoint = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_s = 0.0
        self.restarts: list[str] = []  # why each restart happened

    @classmethod
    def moto_server(cls, log_dir: Path, port: int | None = None) -> Emulator:
        if not MOTO_SERVER.exists():
            raise EmulatorUnavailable(f"moto_server is missing at {MOTO_SERVER} (pip install -e '.[dev]')")
        port = port or free_port()
        argv = [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)]
        return cls("moto_server", argv, port, [probe_dynamodb, probe_kinesis], log_dir / "moto_server.log")

    @classmethod
    def kinesalite(
        cls,
        log_dir: Path,
        port: int | None = None,
        *,
        shard_limit: int = 100,
        counts_port: int | None = None,
        call_log: Path | None = None,
    ) -> Emulator:
        """``counts_port``: also answer on that port with the calls counted by operation (benchmarks);
        ``call_log``: append a line per GetRecords call there (times, shard, status, records)."""
        node = require_node()
        port = port or free_port()
        argv = [
            node,
            "--require",
            str(SURVIVE_ABORTS),
            str(LOOPBACK),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        argv += ["--createStreamMs", "0", "--deleteStreamMs", "0", "--updateStreamMs", "0"]
        argv += ["--shardLimit", str(shard_limit)]
        if counts_port is not None:
            argv += ["--countsPort", str(counts_port)]
        if call_log is not None:
            argv += ["--callLog", str(call_log)]
        return cls("kinesalite", argv, port, [probe_kinesis], log_dir / "kinesalite.log")

    @classmethod
    def dynalite(cls, log_dir: Path, port: int | None = None) -> Emulator:
        node = require_node()
        port = port or free_port()
        argv = [node, "--require", str(SURVIVE_ABORTS), str(NODE_MODULES / "dynalite" / "cli.js")]
        argv += ["--host", "127.0.0.1", "--port", str(port)]
        argv += ["--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"]
        return cls("dynalite", argv, port, [probe_dynamodb], log_dir / "dynalite.log")

    def start(self) -> None:
        """Start the process and wait until every probe answers."""
        started = time.monotonic()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        while True:
            if self.process.poll() is not None:
                raise EmulatorError(f"{self.name} exited with {self.process.returncode}:\n{self._log_tail()}")
            try:
                for probe in self.probes:
                    probe(self.endpoint)
                break
            except (BotoCoreError, ClientError):
                if time.monotonic() - started > STARTUP_TIMEOUT_S:
                    self.stop()
                    raise EmulatorError(
                        f"{self.name} did not answer within {STARTUP_TIMEOUT_S}s:\n{self._log_tail()}"
                    ) from None
                time.sleep(0.02)
        self.startup_s = time.monotonic() - started

    def problem(self) -> str | None:
        """Why the emulator cannot serve (exited, or its port refuses connections), or None."""
        if self.process is None:
            return "not started"
        code = self.process.poll()
        if code is not None:
            return f"exited with {code}"
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2.0):
                return None
        except OSError as exc:
            return f"port {self.port} refuses connections ({exc})"

    def ensure_alive(self, context: str) -> str | None:
        """Restart a dead or deaf emulator on the same port; return what happened (None if it was fine)."""
        problem = self.problem()
        if problem is None:
            return None
        note = f"{self.name} {problem} ({context}); restarted on port {self.port}"
        self.stop()
        with self.log_path.open("ab") as log:
            log.write(f"\n=== {note} ===\n".encode())
        self.start()
        self.restarts.append(note)
        return note

    def stop(self) -> None:
        """Stop the process by its PID: SIGTERM, then SIGKILL after 5 s."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def use_dummy_credentials() -> None:
    """Dummy credentials and region in this process's environment, for the emulators only."""
    os.environ.update(DUMMY_ENV)
    for name in REAL_ACCOUNT_ENV:
        os.environ.pop(name, None)


@contextlib.contextmanager
def running_emulators(log_dir: Path | None = None, *, shard_limit: int = 100) -> Iterator[Backend]:
    """kinesalite + dynalite for a script (the benchmarks): dummy credentials in the environment, both
    emulators started (logs in ``log_dir``, a temporary directory by default) and stopped on exit."""
    use_dummy_credentials()
    with contextlib.ExitStack() as stack:
        if log_dir is None:
            log_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kcl-emulators-")))
        kinesalite = Emulator.kinesalite(log_dir, shard_limit=shard_limit)
        dynalite = Emulator.dynalite(log_dir)
        for emulator in (kinesalite, dynalite):
            stack.callback(emulator.stop)
            emulator.start()
        yield Backend("kinesalite+dynalite", kinesalite.endpoint, dynalite.endpoint)
