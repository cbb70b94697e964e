"""Chaos benchmark: kcl-daemon processes under reshards, SIGKILLs and DynamoDB fault windows.

Starts kinesalite and dynalite on 127.0.0.1 (from ``.cache/node``, as ``scripts/bootstrap.sh`` installs
them), then for each ``--seed`` runs ``tests/chaos/harness.py``: several daemons with the recording
processor, records produced at a steady rate, a split and a merge, SIGKILLs (each victim restarted 2 s
later), DynamoDB fault windows through the fault-injecting proxy. Prints, per seed, the records produced,
lost and duplicated (with the reason of every duplicate), the takeover times after each SIGKILL and the
faults injected. The goal: 0 lost, and duplicates only from crashes and steals.

    .venv/bin/python bench/chaos.py --seed 1 --seed 2 --seed 3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kcl_daemon.aws.clients import ClientSettings, build_clients  # noqa: E402
from tests.chaos.harness import ChaosConfig, run_chaos  # noqa: E402

NODE_MODULES = REPO / ".cache" / "node" / "node_modules"
KINESALITE = REPO / "tests" / "integration" / "kinesalite_loopback.js"
SURVIVE_ABORTS = REPO / "tests" / "integration" / "survive_aborted_requests.js"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _emulator(argv: list[str], port: int, log: Path, service: str) -> Iterator[str]:
    endpoint = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        settings = ClientSettings("us-east-1", endpoint, endpoint, connect_timeout_s=0.5, read_timeout_s=2)
        clients = build_clients(settings)
        deadline = time.monotonic() + 30
        while True:
            try:
                if service == "kinesis":
                    clients.kinesis.list_streams()
                else:
                    clients.dynamodb.list_tables()
                break
            except Exception:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.05)
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, action="append", help="repeat for several runs (default 1)")
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--rate", type=float, default=500.0, help="records per second")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--daemons", type=int, default=3)
    parser.add_argument("--kills", type=int, default=2)
    parser.add_argument("--fault-windows", type=int, default=2)
    parser.add_argument("--fault-window-s", type=float, default=12.0)
    parser.add_argument("--failover-s", type=float, default=3.0)
    parser.add_argument("--keep", action="store_true", help="keep the daemons' logs and records")
    args = parser.parse_args()
    node = shutil.which("node")
    if node is None or not (NODE_MODULES / "dynalite").is_dir():
        print("node and the npm emulators are needed: run scripts/bootstrap.sh", file=sys.stderr)
        return 2
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "test")  # dummy credentials for the local emulators only
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    work = Path(tempfile.mkdtemp(prefix="kcl-chaos-"))
    kin_port, ddb_port = _free_port(), _free_port()
    survive = ["--require", str(SURVIVE_ABORTS)]  # a SIGKILLed daemon's aborted request must not kill them
    kinesalite = [node, *survive, str(KINESALITE), "--host", "127.0.0.1", "--port", str(kin_port)]
    kinesalite += ["--createStreamMs", "0", "--deleteStreamMs", "0", "--updateStreamMs", "0"]
    kinesalite += ["--shardLimit", "100"]
    dynalite = [
        node,
        *survive,
        str(NODE_MODULES / "dynalite" / "cli.js"),
        "--host",
        "127.0.0.1",
        "--port",
        str(ddb_port),
    ]
    dynalite += ["--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"]
    failures = 0
    with (
        _emulator(kinesalite, kin_port, work / "kinesalite.log", "kinesis") as kinesis,
        _emulator(dynalite, ddb_port, work / "dynalite.log", "dynamodb") as dynamodb,
    ):
        for seed in args.seed or [1]:
            config = ChaosConfig(
                seed=seed,
                shards=args.shards,
                records=args.records,
                rate_per_s=args.rate,
                daemons=args.daemons,
                failover_s=args.failover_s,
                kills=args.kills,
                fault_windows=args.fault_windows,
                fault_window_s=args.fault_window_s,
                settle_limit_s=120.0,
            )
            run_dir = work / f"seed-{seed}"
            run_dir.mkdir()
            report = run_chaos(config, kinesis, dynamodb, run_dir, say=lambda line: print(f"  {line}"))
            print("\n".join(report.lines()), flush=True)
            failures += bool(report.lost) or report.bad_duplicates > 0
    if args.keep:
        print(f"logs and records kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
