"""What the lease table costs per lease-hour: DynamoDB calls and consumed read/write units, counted in front
of dynalite, for fleets of kcl-daemon (2.x taker, leader mode), the Java MultiLangDaemon 3.1.3 (leader
mode) and mixed fleets, over ``--leases`` and ``--workers``.

Per configuration (lease count, worker count, mode) a fresh kinesalite stream has one shard per lease and
a fresh application whose lease table holds one unowned TRIM_HORIZON lease per shard (so no mode waits for
an empty table's first shard sync). The workers are processes (``workerId`` w0, w1, ...) running the no-op
amazon_kclpy processor; their DynamoDB endpoint is ``tests/support/capacity_proxy.py``, which counts every
call and the units it consumed (item sizes as DynamoDB computes them, through dynalite's
``ReturnConsumedCapacity``; failed conditional writes and owner-index writes added). The stream stays
idle during the count, so no checkpoint is written: what is counted is the coordination alone (renewals,
scans, the leader lock, lease discovery, worker metrics, shard sync). Phases:

1. wait until every lease is owned by a running worker and no owner has changed for ``--settle-s``
   (two failover times at least), or ``--max-settle-s`` has passed with every lease owned (a leader that
   hands leases over a few per round, as ours does, is then still balancing: the note says so);
2. count for ``--window-s``; per lease-hour = units / (leases x window in hours);
3. with ``--failover``: a producer puts 2 records/s per shard, one worker that is not the leader is
   SIGKILLed, and the takeover time is the time until a surviving worker processed a batch of every shard
   the victim held (first and last shard, from each worker's batch log).

Modes: ``ours-2x`` (``CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1``: the 2.x taker),
``ours-2x-per-worker`` (the same with ``leaseRenewal = PER_WORKER``: one heartbeat per worker), ``ours-3x``
(leader mode, the default ``CLIENT_VERSION_CONFIG_3X``), ``ours-3x-equal`` (leader mode at Java's takeover
time rather than its failoverTimeMillis: :data:`EQUAL_FAILOVER`), ``java-3x`` (Java only, its default
3.x mode), ``mixed-3x`` (half Java, half kcl-daemon, both in 3.x mode). ``--ours-extra KEY=VALUE`` adds
properties to kcl-daemon's workers only. Every worker shard-syncs at Java's default interval (60 s).

    .venv/bin/python bench/dynamodb_cost.py [--leases 8,64,256] [--workers 2,8]
        [--modes ours-2x,ours-3x,java-3x,mixed-3x] [--window-s 120] [--failover-ms 10000] [--failover]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from _daemons import (
    NOOP_PROCESSOR,
    BatchLog,
    DaemonProcess,
    daemon_argv,
    daemon_env,
    h2c_proxy,
    java_jars,
    properties,
)
from _local import quiet_logs, unique
from _streams import prepare_leases

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.aws.provision import MAX_PUT_RECORDS_ENTRIES, ensure_stream
from kcl_daemon.core.leader.table_names import legacy_table_names
from kcl_daemon.local.producer import open_hash_ranges, partition_keys_for
from tests.support.capacity_proxy import CapacityProxy, Usage
from tests.support.emulators import Backend, running_emulators

MODES: Final = (
    "ours-2x",
    "ours-2x-per-worker",
    "ours-3x",
    "ours-3x-per-worker",
    "ours-3x-equal",
    "java-3x",
    "mixed-3x",
)
TWO_X: Final = {"clientVersionConfig": "CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1"}
#: ours-2x-per-worker: the 2.x taker renewing one heartbeat per worker instead of every lease
PER_WORKER: Final = {**TWO_X, "leaseRenewal": "PER_WORKER"}
THREE_X: Final = {"clientVersionConfig": "CLIENT_VERSION_CONFIG_3X"}
#: ours-3x-per-worker: the leader mode with every worker heartbeating instead of renewing its leases
THREE_X_PER_WORKER: Final = {**THREE_X, "leaseRenewal": "PER_WORKER"}
POLL_S: Final = 0.5
#: ours-3x-equal: kcl-daemon's leader mode at Java 3.x's takeover time (a SIGKILLed worker's leases are
#: processed again after about 50-70 s with Java's leader at failoverTimeMillis 10 s, as measured here):
#: a longer failover time, so one renewal per lease every 10 s, and a shorter assignment interval
EQUAL_FAILOVER: Final = {"failoverTimeMillis": "30000", "leaseAssignmentIntervalMillis": "5000"}
#: DynamoDB on-demand prices, us-east-1 (USD per million request units) and hours in a month
WRITE_PRICE: Final = 1.25
READ_PRICE: Final = 0.25
HOURS_PER_MONTH: Final = 730


@dataclass(slots=True)
class Figures:
    mode: str
    leases: int
    workers: int
    failover_ms: int
    ours_extra: dict[str, str]
    window_s: float = 0.0
    settle_s: float = 0.0
    calls: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    by_operation: dict[str, list[float]] = field(
        default_factory=dict
    )  # "table-kind Operation" -> [calls, RCU, WCU]
    takeover_first_s: float = float("nan")
    takeover_last_s: float = float("nan")
    victim_leases: int = 0
    notes: list[str] = field(default_factory=list)

    def per_lease_hour(self, value: float) -> float:
        return value / self.leases / (self.window_s / 3600) if self.window_s else float("nan")


def worker_kinds(mode: str, workers: int) -> list[str]:
    if mode.startswith("ours"):
        return ["kcl-daemon"] * workers
    if mode == "java-3x":
        return ["java"] * workers
    return ["java" if i % 2 == 0 else "kcl-daemon" for i in range(workers)]


def prepare(clients: AwsClients, shards: int, app: str) -> tuple[str, list[str]]:
    stream = unique("cost")
    ensure_stream(clients.kinesis, stream, shards)
    listed = Kinesis(clients.kinesis).list_shards(stream)
    prepare_leases(clients, app, listed)
    return stream, partition_keys_for(open_hash_ranges(listed), per_range=1)


def owners(clients: AwsClients, app: str) -> dict[str, tuple[str | None, int]]:
    leases = DynamoLeaseTable(clients.dynamodb, app).list_leases(consistent=True).leases
    return {lease.lease_key: (lease.lease_owner, lease.lease_counter) for lease in leases}


def leader(clients: AwsClients, app: str) -> str | None:
    with contextlib.suppress(Exception):
        item = clients.dynamodb.get_item(
            TableName=legacy_table_names(app, app).coordinator_state,
            Key={"key": {"S": "Leader"}},
            ConsistentRead=True,
        ).get("Item")
        return None if item is None else str(item["ownerName"]["S"])
    return None


def table_kind(table: str, app: str) -> str:
    if table == app:
        return "lease"
    return table.removeprefix(app + "-") if table.startswith(app) else table


class Trickle:
    """2 records/s per shard on a thread (the failover phase: a takeover shows as a processed batch)."""

    def __init__(self, clients: AwsClients, stream: str, keys: list[str], per_shard_s: float = 2.0) -> None:
        self._args = (clients, stream, keys, per_shard_s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="trickle")

    def _run(self) -> None:
        clients, stream, keys, per_shard_s = self._args
        sent, started = 0, time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * per_shard_s * len(keys))
            while sent < due:
                n = min(MAX_PUT_RECORDS_ENTRIES, due - sent)
                entries = [{"Data": b"t", "PartitionKey": keys[(sent + i) % len(keys)]} for i in range(n)]
                with contextlib.suppress(Exception):
                    clients.kinesis.put_records(StreamName=stream, Records=entries)  # type: ignore[arg-type]
                sent += n
            self._stop.wait(0.25)

    def __enter__(self) -> Trickle:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)


def run_config(
    backend: Backend,
    clients: AwsClients,
    proxy: CapacityProxy,
    java_kinesis: str,
    jars: Path | None,
    mode: str,
    leases: int,
    workers: int,
    args: argparse.Namespace,
    work: Path,
) -> Figures:
    extra = dict(kv.split("=", 1) for kv in args.ours_extra)
    if mode == "ours-3x-equal":  # Java's takeover time, not its failoverTimeMillis: see the docstring
        extra = {**EQUAL_FAILOVER, **extra}
    figures = Figures(
        mode, leases, workers, args.failover_ms, {k.strip(): v.strip() for k, v in extra.items()}
    )
    app = unique(f"cost-{mode}")
    stream, keys = prepare(clients, leases, app)
    proxy.gsi_tables = (*proxy.gsi_tables, app)
    run_dir = work / app
    run_dir.mkdir()
    processes: dict[str, DaemonProcess] = {}
    logs: dict[str, BatchLog] = {}
    try:
        for index, kind in enumerate(worker_kinds(mode, workers)):
            name = f"w{index}"
            java = kind == "java"
            # Java's default shard sync interval for every worker (properties() sets 5 s for the benchmarks
            # that create streams as they go): shard sync scans the lease table
            values = {"workerId": name, "shardSyncIntervalMillis": "60000"}
            values.update(
                {
                    "ours-2x": TWO_X,
                    "ours-2x-per-worker": PER_WORKER,
                    "ours-3x-per-worker": THREE_X_PER_WORKER,
                }.get(mode, THREE_X)
            )
            if not java:
                values.update(figures.ours_extra)
            props = run_dir / f"{name}.properties"
            props.write_text(
                properties(
                    processor=NOOP_PROCESSOR,
                    stream=stream,
                    app=app,
                    kinesis=java_kinesis if java else backend.kinesis_endpoint,
                    dynamodb=proxy.endpoint,
                    java=java,
                    max_records=1000,
                    idle_ms=args.idle_ms,
                    failover_ms=args.failover_ms,
                    extra=values,
                )
            )
            logs[name] = BatchLog(run_dir / f"{name}.batches")
            env = daemon_env({"BENCH_BATCH_LOG": str(logs[name].path)})
            processes[name] = DaemonProcess(
                daemon_argv(kind, props, jars), run_dir, run_dir / f"{name}.log", env
            )
        started = time.monotonic()
        settle_for = max(args.settle_s, 2 * args.failover_ms / 1000)
        last_change, previous = time.monotonic(), {}
        while True:
            for process in processes.values():
                process.check()
            now_owners = {key: owner for key, (owner, _) in owners(clients, app).items()}
            if now_owners != previous:
                last_change, previous = time.monotonic(), now_owners
            settled = all(owner in processes for owner in now_owners.values())
            if settled and time.monotonic() - last_change >= settle_for:
                break
            if settled and time.monotonic() - started >= args.max_settle_s:
                # a leader that hands leases over a few per round is still balancing: count anyway
                figures.notes.append(f"still balancing after {args.max_settle_s:.0f}s")
                break
            if time.monotonic() - started > args.limit_s:
                spread = Counter(now_owners.values())
                raise TimeoutError(f"{mode} {leases}x{workers}: not settled after {args.limit_s}s: {spread}")
            time.sleep(POLL_S)
        figures.settle_s = time.monotonic() - started
        spread = Counter(previous.values())
        figures.notes.append("leases per worker " + " ".join(f"{w}:{spread.get(w, 0)}" for w in processes))
        before = proxy.snapshot()
        window_started = time.monotonic()
        while time.monotonic() - window_started < args.window_s:
            for process in processes.values():
                process.check()
            time.sleep(1.0)
        usage: Usage = proxy.snapshot() - before
        figures.window_s = time.monotonic() - window_started
        mine = {key: n for key, n in usage.calls.items() if key[0].startswith(app)}
        figures.calls = sum(mine.values())
        figures.read_units = sum(n for key, n in usage.read_units.items() if key[0].startswith(app))
        figures.write_units = sum(n for key, n in usage.write_units.items() if key[0].startswith(app))
        for key, n in sorted(mine.items()):
            label = f"{table_kind(key[0], app)} {key[1]}"
            figures.by_operation[label] = [n, usage.read_units.get(key, 0.0), usage.write_units.get(key, 0.0)]
        if args.failover:
            measure_takeover(figures, clients, app, stream, keys, processes, logs)
    finally:
        for process in processes.values():
            process.stop(timeout_s=15.0)
    return figures


def measure_takeover(
    figures: Figures,
    clients: AwsClients,
    app: str,
    stream: str,
    keys: list[str],
    processes: dict[str, DaemonProcess],
    logs: dict[str, BatchLog],
) -> None:
    with Trickle(clients, stream, keys):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # every shard processing before the kill
            for log in logs.values():
                log.poll()
            if len(set().union(*(log.shards for log in logs.values()))) >= figures.leases:
                break
            time.sleep(POLL_S)
        boss = leader(clients, app)
        held = owners(clients, app)
        candidates = [w for w in processes if w != boss and any(o == w for o, _ in held.values())]
        if not candidates:
            figures.notes.append("no worker to kill")
            return
        victim = candidates[-1]
        lost = {key for key, (owner, _) in held.items() if owner == victim}
        figures.victim_leases = len(lost)
        for log in logs.values():
            log.poll()
        killed_epoch = time.time()
        processes[victim].kill()
        first: dict[str, float] = {}
        deadline = time.monotonic() + 300
        while len(first) < len(lost) and time.monotonic() < deadline:
            time.sleep(POLL_S)
            for name, log in logs.items():
                if name == victim:
                    continue
                for batch in log.poll():
                    if batch.shard in lost and batch.records and batch.start >= killed_epoch:
                        first.setdefault(batch.shard, batch.start - killed_epoch)
        if first:
            figures.takeover_first_s, figures.takeover_last_s = min(first.values()), max(first.values())
        if len(first) < len(lost):
            figures.notes.append(f"{len(lost) - len(first)} shard(s) not taken over within 300 s")
        del processes[victim]


def report(results: list[Figures]) -> str:
    lines = [
        "| mode | leases | workers | window s | calls/lease-h | RCU/lease-h | WCU/lease-h | "
        "takeover after SIGKILL s (first-last) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for f in results:
        takeover = (
            "-"
            if f.takeover_last_s != f.takeover_last_s
            else f"{f.takeover_first_s:.1f}-{f.takeover_last_s:.1f}"
        )
        extra = (
            f" ({', '.join(f'{k}={v}' for k, v in f.ours_extra.items())})"
            if f.ours_extra and f.mode != "java-3x"
            else ""
        )
        calls, rcu, wcu = (f.per_lease_hour(v) for v in (f.calls, f.read_units, f.write_units))
        lines.append(
            f"| {f.mode}{extra} | {f.leases} | {f.workers} | {f.window_s:.0f} | {calls:,.0f} | {rcu:,.1f} | "
            f"{wcu:,.1f} | {takeover} |"
        )
    return "\n".join(lines) + "\n"


def ratios(results: list[Figures]) -> str:
    out = []
    for f in results:
        if f.mode == "java-3x":
            continue
        java = [j for j in results if j.mode == "java-3x" and j.leases == f.leases and j.workers == f.workers]
        if java and java[0].write_units:
            j = java[0]
            wcu = f.per_lease_hour(f.write_units) / j.per_lease_hour(j.write_units)
            rcu = f.per_lease_hour(f.read_units) / max(j.per_lease_hour(j.read_units), 1e-9)
            calls = f.per_lease_hour(f.calls) / j.per_lease_hour(j.calls)
            cost = dollars_per_month(f, f.leases) / dollars_per_month(j, j.leases)
            out.append(
                f"{f.mode} / java-3x at {f.leases} leases, {f.workers} workers: $ x{cost:.2f}, "
                f"WCU x{wcu:.2f}, RCU x{rcu:.2f}, calls x{calls:.2f}"
            )
    return "\n".join(out) + "\n"


def breakdown(results: list[Figures]) -> str:
    lines = []
    for f in results:
        lines.append(f"{f.mode} {f.leases} leases x {f.workers} workers ({'; '.join(f.notes)}):")
        for label, (calls, rcu, wcu) in f.by_operation.items():
            lines.append(
                f"    {label:<34} {f.per_lease_hour(calls):>9,.0f} calls {f.per_lease_hour(rcu):>9,.1f} RCU "
                f"{f.per_lease_hour(wcu):>9,.1f} WCU  per lease-hour"
            )
    return "\n".join(lines) + "\n"


def dollars_per_month(f: Figures, leases: int) -> float:
    """On-demand cost of ``leases`` leases for a month at this configuration's units per lease-hour."""
    units = f.per_lease_hour(f.write_units) * WRITE_PRICE + f.per_lease_hour(f.read_units) * READ_PRICE
    return units / 1e6 * leases * HOURS_PER_MONTH


def dollars(results: list[Figures]) -> str:
    """$/month for the measured fleets: one row per (leases, workers), one column per mode."""
    modes = [m for m in MODES if any(f.mode == m for f in results)]
    lines = [
        f"on-demand, us-east-1: ${WRITE_PRICE} per million write request units, ${READ_PRICE} per million "
        f"read request units, {HOURS_PER_MONTH} hours a month",
        "| leases | workers | " + " | ".join(f"{m} $/month" for m in modes) + " |",
        "| --- | --- |" + " --- |" * len(modes),
    ]
    for leases, workers in sorted({(f.leases, f.workers) for f in results}):
        cells = []
        for mode in modes:
            found = [f for f in results if (f.mode, f.leases, f.workers) == (mode, leases, workers)]
            cells.append(f"{dollars_per_month(found[0], leases):,.2f}" if found else "-")
        lines.append(f"| {leases} | {workers} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def print_all(results: list[Figures]) -> None:
    order = {mode: index for index, mode in enumerate(MODES)}
    results = sorted(results, key=lambda f: (f.leases, f.workers, order.get(f.mode, len(order))))
    print()
    print(report(results))
    print(ratios(results))
    print(dollars(results))
    print(breakdown(results))


@contextlib.contextmanager
def counting(upstream: str) -> Iterator[CapacityProxy]:
    proxy = CapacityProxy(upstream, label_items=True).start()  # leader lock, worker metrics apart
    try:
        yield proxy
    finally:
        proxy.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leases", default="8,64,256")
    parser.add_argument("--workers", default="2,8")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--window-s", type=float, default=120.0)
    parser.add_argument("--settle-s", type=float, default=20.0)
    parser.add_argument(
        "--max-settle-s", type=float, default=120.0, help="count after this even if leases still move"
    )
    parser.add_argument("--failover-ms", type=int, default=10000)
    parser.add_argument("--idle-ms", type=int, default=2000, help="idleTimeBetweenReadsInMillis")
    parser.add_argument("--failover", action="store_true", help="also SIGKILL a worker and time the takeover")
    parser.add_argument("--ours-extra", action="append", default=[], help="KEY=VALUE for kcl-daemon workers")
    parser.add_argument("--limit-s", type=float, default=400.0)
    parser.add_argument("--no-java", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="append the figures to this JSON file")
    parser.add_argument(
        "--report",
        type=Path,
        nargs="+",
        default=None,
        help="run nothing: print the tables of these --json files",
    )
    args = parser.parse_args()
    if args.report:
        print_all([Figures(**row) for path in args.report for row in json.loads(path.read_text())])
        return
    quiet_logs()
    jars = java_jars(disabled=args.no_java)
    modes = [m for m in args.modes.split(",") if jars or m.startswith("ours")]
    results: list[Figures] = []
    with (
        tempfile.TemporaryDirectory(prefix="ddb-cost-") as tmp,
        running_emulators(shard_limit=100000) as backend,
        counting(backend.dynamodb_endpoint) as proxy,
        h2c_proxy(backend.kinesis_endpoint) if jars else contextlib.nullcontext("") as java_kinesis,
    ):
        clients = backend.clients(max_pool_connections=16, read_timeout_s=30.0)
        for leases in (int(n) for n in args.leases.split(",")):
            for workers in (int(n) for n in args.workers.split(",")):
                for mode in modes:
                    started = time.monotonic()
                    try:
                        figures = run_config(
                            backend,
                            clients,
                            proxy,
                            java_kinesis,
                            jars,
                            mode,
                            leases,
                            workers,
                            args,
                            Path(tmp),
                        )
                    except (TimeoutError, RuntimeError) as exc:
                        print(f"{mode} {leases} leases x {workers} workers: FAILED: {exc}", flush=True)
                        continue
                    results.append(figures)
                    print(
                        f"{mode:<9} {leases:>4} leases x {workers} workers: "
                        f"{figures.per_lease_hour(figures.calls):8,.0f} calls "
                        f"{figures.per_lease_hour(figures.read_units):8,.1f} RCU "
                        f"{figures.per_lease_hour(figures.write_units):8,.1f} WCU per lease-hour; "
                        f"takeover {figures.takeover_first_s:.1f}-{figures.takeover_last_s:.1f}s; "
                        f"settled in {figures.settle_s:.0f}s, counted {figures.window_s:.0f}s "
                        f"({time.monotonic() - started:.0f}s in all)",
                        flush=True,
                    )
    print_all(results)
    if args.json is not None:
        existing: list[Any] = json.loads(args.json.read_text()) if args.json.exists() else []
        args.json.write_text(json.dumps(existing + [asdict(f) for f in results], indent=1) + "\n")


if __name__ == "__main__":
    main()
