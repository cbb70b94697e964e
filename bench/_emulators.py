"""kinesalite + dynalite as separate processes on 127.0.0.1 for the benchmarks that measure the daemon's
own CPU (an in-process backend would share the process and the GIL with it).

Not a benchmark itself: ``profile_retrieval.py`` and ``vs_java.py`` import it. Node and the npm packages
come from ``scripts/bootstrap.sh`` (``.cache/node``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kcl_daemon.aws.clients import AwsClients, ClientSettings, build_clients

REPO: Final = Path(__file__).resolve().parents[1]
NODE_MODULES: Final = REPO / ".cache" / "node" / "node_modules"
LOOPBACK: Final = REPO / "tests" / "integration" / "kinesalite_loopback.js"
REGION: Final = "us-east-1"
DUMMY_ENV: Final = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}


@dataclass(frozen=True, slots=True)
class Emulators:
    kinesis_endpoint: str
    dynamodb_endpoint: str

    def clients(self, max_pool_connections: int = 64) -> AwsClients:
        return build_clients(
            ClientSettings(
                region=REGION,
                kinesis_endpoint=self.kinesis_endpoint,
                dynamodb_endpoint=self.dynamodb_endpoint,
                max_pool_connections=max_pool_connections,
                read_timeout_s=30.0,
            )
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, process: subprocess.Popen[bytes], limit_s: float = 30.0) -> None:
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if process.poll() is not None:
            raise RuntimeError(f"emulator exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {limit_s}s")


@contextlib.contextmanager
def running_emulators() -> Iterator[Emulators]:
    """Start kinesalite and dynalite (in-memory, zero create delays); stop both (by PID) on exit."""
    os.environ.update(DUMMY_ENV)
    node = shutil.which("node")
    if node is None or not (NODE_MODULES / "kinesalite").is_dir():
        raise SystemExit("node and .cache/node (kinesalite, dynalite) are needed: run make bootstrap")
    kport, dport = free_port(), free_port()
    kinesalite = [node, str(LOOPBACK), "--host", "127.0.0.1", "--port", str(kport)]
    kinesalite += ["--createStreamMs", "0", "--deleteStreamMs", "0", "--updateStreamMs", "0"]
    kinesalite += ["--shardLimit", "200"]
    dynalite = [node, str(NODE_MODULES / "dynalite" / "cli.js"), "--host", "127.0.0.1", "--port", str(dport)]
    dynalite += ["--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for argv, port in ((kinesalite, kport), (dynalite, dport)):
            process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            processes.append(process)
            _wait_port(port, process)
        yield Emulators(f"http://127.0.0.1:{kport}", f"http://127.0.0.1:{dport}")
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
