"""Leader mode against the 2.x taker, side by side in one run (kinesalite + dynalite on 127.0.0.1).

For each mode (``CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1`` = the 2.x taker, and
``CLIENT_VERSION_CONFIG_3X`` with the LEASE_COUNT_BASED decider, so both modes aim at the same spread)
two kcl-daemon processes with the recording processor share a 4-shard stream while records flow:

* planned move: daemon A holds all four shards, B joins; records processed twice until 2/2;
* DynamoDB calls per lease-hour in the steady state (2 daemons, 4 leases), counted by a proxy in front
  of dynalite (every call of the daemons: renewals, scans, queries, lock, metrics, checkpoints);
* takeover after SIGKILL of a worker (not the leader) and of the leader (in 2.x every worker is alike).

    .venv/bin/python bench/leader_mode.py [--failover-s 3]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from kcl_daemon.aws.clients import ClientSettings, build_clients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend, EmulatorUnavailable, running_emulators
from tests.support.fault_proxy import FaultProxy
from tests.support.fleet import Fleet, owners
from tests.support.streams import put, wait_for_stream

MODES = {
    "2.x taker": "clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1\n",
    "3.x leader": (
        "clientVersionConfig = CLIENT_VERSION_CONFIG_3X\nleaseAssignmentStrategy = LEASE_COUNT_BASED\n"
    ),
}


def _leader(clients: object, table: str) -> str | None:
    """The holder of the Leader lock: in the lease table (a new application's single-table layout)."""
    try:
        item = clients.dynamodb.get_item(  # type: ignore[attr-defined]
            TableName=table, Key={"leaseKey": {"S": "Leader"}}, ConsistentRead=True
        ).get("Item")
    except Exception:  # noqa: BLE001 - the table may be gone
        return None
    return None if item is None else str(item["ownerName"]["S"])


def run_mode(
    name: str, kinesis: str, dynamodb: str, work: Path, failover_s: float, steady_s: float
) -> dict[str, str]:
    proxy = FaultProxy(dynamodb).start()
    try:
        clients = build_clients(ClientSettings("us-east-1", kinesis, dynamodb))
        table_name = f"bench-{name[:3].replace('.', '')}-{int(time.time())}"
        table = DynamoLeaseTable(clients.dynamodb, table_name)
        stream = f"bench-{int(time.time() * 1000) % 10**9}"
        clients.kinesis.create_stream(StreamName=stream, ShardCount=4)
        wait_for_stream(clients, stream)
        run_dir = work / name.replace(" ", "-")
        run_dir.mkdir()
        backend = Backend("bench", kinesis, proxy.endpoint)
        failover_ms = int(failover_s * 1000)
        fleet = Fleet(run_dir, backend, table_name, stream, failover_ms=failover_ms, extra=MODES[name])
        stop = threading.Event()

        def produce() -> None:
            n = 0
            while not stop.is_set():
                put(clients, stream, range(n, n + 20))
                n += 20
                time.sleep(0.1)

        producer = threading.Thread(target=produce, daemon=True)
        try:
            fleet.start("daemon-a")
            fleet.wait(lambda: _safe(lambda: owners(table)) == {"daemon-a": 4}, 120, "A holds 4")
            producer.start()
            time.sleep(2.0)
            fleet.start("daemon-b")
            move_started = time.monotonic()
            fleet.wait(
                lambda: sorted(_safe(lambda: owners(table)).values()) == [2, 2] and _settled(table),
                180,
                "2/2",
            )
            move_s = time.monotonic() - move_started
            time.sleep(2.0)
            # steady state: count the daemons' DynamoDB calls
            before = sum(proxy.calls.values())
            time.sleep(steady_s)
            calls = sum(proxy.calls.values()) - before
            per_lease_hour = calls / 4 / (steady_s / 3600)
            stop.set()
            producer.join()
            time.sleep(3.0)
            counts = Counter(row["data"] for row in fleet.recorded())
            duplicates = sum(c - 1 for c in counts.values() if c > 1)
            # worker SIGKILL (not the leader)
            leader = _leader(clients, table_name)
            victim = "daemon-b" if leader != "daemon-b" else "daemon-a"
            survivor = "daemon-a" if victim == "daemon-b" else "daemon-b"
            fleet.daemons[victim].stop(signal.SIGKILL)
            killed = time.monotonic()
            fleet.wait(lambda: _safe(lambda: owners(table)) == {survivor: 4}, 180, "worker takeover")
            worker_takeover = time.monotonic() - killed
            # leader SIGKILL: bring a worker back, balance, kill the leader (2.x: the other daemon)
            fleet.start(victim + "-2")
            fleet.wait(
                lambda: sorted(_safe(lambda: owners(table)).values()) == [2, 2] and _settled(table),
                180,
                "2/2",
            )
            leader = _leader(clients, table_name) or survivor
            other = victim + "-2" if leader == survivor else survivor
            fleet.daemons[leader].stop(signal.SIGKILL)
            killed = time.monotonic()
            fleet.wait(lambda: _safe(lambda: owners(table)) == {other: 4}, 300, "leader takeover")
            leader_takeover = time.monotonic() - killed
        finally:
            stop.set()
            fleet.close()
        return {
            "planned move: duplicates": f"{duplicates} of {len(counts)} records",
            "planned move: time to 2/2": f"{move_s:.1f} s",
            "DynamoDB calls per lease-hour": f"{per_lease_hour:,.0f}",
            "takeover after worker SIGKILL": f"{worker_takeover:.1f} s",
            "takeover after leader SIGKILL": f"{leader_takeover:.1f} s",
        }
    finally:
        proxy.stop()


def _safe(fn: object) -> dict[str, int]:
    try:
        return fn()  # type: ignore[operator,no-any-return]
    except Exception:  # noqa: BLE001 - the table may not exist yet
        return {}


def _settled(table: DynamoLeaseTable) -> bool:
    try:
        return all(lease.checkpoint_owner is None for lease in table.list_leases(consistent=True).leases)
    except Exception:  # noqa: BLE001
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--failover-s", type=float, default=3.0)
    parser.add_argument("--steady-s", type=float, default=30.0, help="window for counting DynamoDB calls")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kcl-leader-bench-"))
    results: dict[str, dict[str, str]] = {}
    try:
        with running_emulators(work) as backend:
            for mode in MODES:
                print(f"running {mode} ...", flush=True)
                results[mode] = run_mode(
                    mode,
                    backend.kinesis_endpoint,
                    backend.dynamodb_endpoint,
                    work,
                    args.failover_s,
                    args.steady_s,
                )
    except EmulatorUnavailable as exc:
        shutil.rmtree(work, ignore_errors=True)
        print(f"the emulators are needed: {exc}", file=sys.stderr)
        return 2
    names = list(MODES)
    print(f"\nfailoverTimeMillis = {int(args.failover_s * 1000)}; 2 daemons, 4 shards, records flowing")
    print(f"{'':34} " + " ".join(f"{n:>22}" for n in names))
    for row in results[names[0]]:
        print(f"{row:34} " + " ".join(f"{results[n][row]:>22}" for n in names))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
