"""A chaos run of several kcl-daemon processes: reshards, a SIGKILL and a DynamoDB fault window.

In either lease mode (``lease_mode``: ``leader``, KCL 3.x leader-based assignment, the default of a
fresh fleet; ``taker``, the 2.x-compatible taker), on an idle host or with a busy loop on every core
at the daemons' priority (``cpu_hog``).

Shared by the CI chaos test (``tests/e2e/test_chaos.py``, short) and ``bench/chaos.py`` (longer, any
seed). Everything random (event times, victims, shards, fault decisions, partition keys) comes from the
seed. The daemons run the recording processor (every record into one JSON-lines file); their DynamoDB
traffic goes through the fault-injecting proxy, their Kinesis traffic straight to the emulator.

The report says how many records were produced, lost and duplicated, and why each duplicate happened
(``tests/support/chaos/classify.py``: crash, steal, lease expired, same worker), with the evidence for the
first few duplicates that no crash or steal explains; how many leases a worker gave up while the table
still named it (a poller reads the table directly, not through the proxy, every 0.2 s); and, after each
SIGKILL, how long until each of the victim's shards had a record processed by another worker.
"""

from __future__ import annotations

import bisect
import itertools
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kcl_daemon.aws.clients import AwsClients, ClientSettings, build_clients
from tests.support.chaos.classify import ALLOWED_REASONS, classify, describe, log_time, parse_takes
from tests.support.daemon import Daemon
from tests.support.emulators import REGION
from tests.support.fault_proxy import Fault, FaultProxy, Phase, rule
from tests.support.paths import RECORDER
from tests.support.streams import wait_for_stream


@dataclass(frozen=True)
class ChaosConfig:
    seed: int = 1
    shards: int = 6
    records: int = 10_000
    rate_per_s: float = 400.0
    daemons: int = 3
    failover_s: float = 3.0
    kills: int = 1
    fault_windows: int = 1
    fault_window_s: float = 8.0
    settle_limit_s: float = 60.0
    lease_mode: str = "taker"  # "leader": KCL 3.x leader-based assignment; "taker": the 2.x taker
    cpu_hog: bool = False  # a busy loop on every core while the run lasts
    reshard: bool = True
    #: leaseRenewal (either lease mode): PER_LEASE, Java's, or PER_WORKER (one heartbeat per worker)
    lease_renewal: str = "PER_LEASE"


@dataclass
class ChaosReport:
    seed: int
    produced: int = 0
    delivered: int = 0
    lost: list[str] = field(default_factory=list)
    duplicates: Counter[str] = field(default_factory=Counter)  # reason -> extra deliveries
    takeover_s: list[float] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)  # "fault/phase" -> count
    dynamodb_calls: int = 0
    events: list[str] = field(default_factory=list)
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    killed: set[str] = field(default_factory=set)
    tracebacks: int = 0
    expired_leases: int = 0  # leases a live worker lost by its own clock (could not renew in time)
    dropped_while_named: int = 0  # leases given up while the table still named the worker
    #: leases a worker reported lost after its own cleanup deleted them (finished shards): noise (issue 28)
    own_deletions_lost: int = 0
    late_old_owner: int = 0  # records an old owner delivered after the new owner had delivered some
    resumed_s: list[float] = field(default_factory=list)  # SIGKILL -> a victim's shard's next record
    #: the same for the shards of victims that were leader when killed, or were killed within one
    #: failover of the leader (no leader could move their leases until a new one took the lock; also
    #: in ``resumed_s``)
    resumed_leader_s: list[float] = field(default_factory=list)
    leader_killed: int = 0
    mode: str = "taker"
    hog: bool = False
    unexplained: list[str] = field(default_factory=list)  # evidence for the first few bad duplicates
    wall_s: float = 0.0

    @property
    def bad_duplicates(self) -> int:
        return sum(n for reason, n in self.duplicates.items() if reason not in ALLOWED_REASONS)

    def lines(self) -> list[str]:
        dup_total = sum(self.duplicates.values())
        reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(self.duplicates.items())) or "none"
        takeovers = ", ".join(f"{t:.1f}s" for t in sorted(self.takeover_s)) or "n/a"
        faults = ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items())) or "none"
        resumed = (
            f"p50 {statistics.median(self.resumed_s):.1f}s, max {max(self.resumed_s):.1f}s over "
            f"{len(self.resumed_s)} shard(s)"
            if self.resumed_s
            else "n/a"
        )
        return [
            f"seed {self.seed} ({self.mode} mode, {'CPU hog' if self.hog else 'idle'}): "
            f"{self.produced} produced, {self.delivered} delivered, {len(self.lost)} lost, "
            f"{dup_total} duplicated ({100 * dup_total / max(self.produced, 1):.2f}%: {reasons})",
            f"  takeover after SIGKILL: {takeovers}",
            f"  resumption after SIGKILL (next record by another worker): {resumed}; "
            f"leader killed {self.leader_killed} time(s)",
            f"  leases dropped while the table still named the worker: {self.dropped_while_named}; "
            f"records delivered by an old owner after the new owner's: {self.late_old_owner}",
            f"  DynamoDB faults injected: {sum(self.faults.values())} of {self.dynamodb_calls} calls "
            f"({faults})",
            f"  leases lost by local expiry (live workers): {self.expired_leases}; "
            f"finished leases reported lost after the worker's own cleanup deleted them: "
            f"{self.own_deletions_lost}; "
            f"exit codes: {self.exit_codes}; tracebacks in daemon logs: {self.tracebacks}; "
            f"wall {self.wall_s:.0f}s",
            "  events: " + "; ".join(self.events),
            *(f"  unexplained duplicate: {line}" for line in self.unexplained),
        ]


class _Producer(threading.Thread):
    """PutRecords at a steady rate; remembers every record the stream accepted."""

    def __init__(self, clients: AwsClients, stream: str, config: ChaosConfig, rng: random.Random) -> None:
        super().__init__(name="chaos-producer", daemon=True)
        self.clients, self.stream, self.config = clients, stream, config
        self.keys = [f"pk-{rng.getrandbits(64):x}" for _ in range(997)]
        self.accepted: list[str] = []
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            batch = 50
            started = time.monotonic()
            for first in range(0, self.config.records, batch):
                entries = [
                    {"Data": f"r{n:07d}".encode(), "PartitionKey": self.keys[n % len(self.keys)]}
                    for n in range(first, min(first + batch, self.config.records))
                ]
                while entries:
                    response = self.clients.kinesis.put_records(StreamName=self.stream, Records=entries)  # type: ignore[arg-type]
                    failed = []
                    for entry, result in zip(entries, response["Records"], strict=True):
                        if result.get("ErrorCode"):
                            failed.append(entry)
                        else:
                            self.accepted.append(entry["Data"].decode())
                    entries = failed
                due = started + (first + batch) / self.config.rate_per_s
                time.sleep(max(due - time.monotonic(), 0.0))
        except Exception as exc:  # noqa: BLE001 - reported by the harness
            self.error = exc


def _open_shards(clients: AwsClients, stream: str) -> list[dict[str, Any]]:
    shards = clients.kinesis.list_shards(StreamName=stream)["Shards"]
    open_ = [s for s in shards if "EndingSequenceNumber" not in s["SequenceNumberRange"]]
    return sorted(open_, key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))


def _split(clients: AwsClients, stream: str, rng: random.Random) -> str:
    shard = rng.choice(_open_shards(clients, stream))
    lo, hi = int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"])
    clients.kinesis.split_shard(
        StreamName=stream, ShardToSplit=shard["ShardId"], NewStartingHashKey=str((lo + hi) // 2)
    )
    wait_for_stream(clients, stream, timeout_s=30.0)
    return f"split {shard['ShardId']}"


def _merge(clients: AwsClients, stream: str, rng: random.Random) -> str:
    shards = _open_shards(clients, stream)
    pairs = [
        (a, b)
        for a, b in itertools.pairwise(shards)
        if int(a["HashKeyRange"]["EndingHashKey"]) + 1 == int(b["HashKeyRange"]["StartingHashKey"])
    ]
    a, b = rng.choice(pairs)
    clients.kinesis.merge_shards(
        StreamName=stream, ShardToMerge=a["ShardId"], AdjacentShardToMerge=b["ShardId"]
    )
    wait_for_stream(clients, stream, timeout_s=30.0)
    return f"merge {a['ShardId']}+{b['ShardId']}"


def _fault_rules(rng: random.Random) -> tuple[Any, ...]:
    """The fault mix of the window: throttles, 500s before and after the write, dropped replies, latency."""
    return (
        rule(Fault.THROTTLE, rng.uniform(0.05, 0.12)),
        rule(Fault.ERROR_500, rng.uniform(0.02, 0.05)),
        rule(Fault.ERROR_500, rng.uniform(0.03, 0.06), phase=Phase.AFTER),
        rule(Fault.DROP, rng.uniform(0.01, 0.03), phase=Phase.AFTER),
        rule(Fault.LATENCY, 0.1, latency_s=rng.uniform(0.1, 0.4)),
    )


def _properties(path: Path, worker: str, table: str, stream: str, kinesis: str, dynamodb: str,
                config: ChaosConfig) -> Path:  # fmt: skip
    path.write_text(
        f"executableName = {sys.executable} {RECORDER}\n"
        f"applicationName = {table}\n"
        f"streamName = {stream}\n"
        f"regionName = {REGION}\n"
        f"kinesisEndpoint = {kinesis}\n"
        f"dynamoDBEndpoint = {dynamodb}\n"
        f"workerId = {worker}\n"
        "initialPositionInStream = TRIM_HORIZON\n"
        "idleTimeBetweenReadsInMillis = 200\n"
        f"failoverTimeMillis = {int(config.failover_s * 1000)}\n"
        "parentShardPollIntervalMillis = 500\n"
        "shardSyncIntervalMillis = 3000\n"
        "shutdownGraceMillis = 15000\n"
        "childStopTimeoutMillis = 2000\n"
        "retrievalMode = POLLING\n"  # kinesalite has no enhanced fan-out
        # taker: pure 2.x, no KCL 3.x items written; leader: the 3.x default of a fresh fleet
        + (
            "clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1\n"
            if config.lease_mode == "taker"
            else ""
        )
        + (f"leaseRenewal = {config.lease_renewal}\n" if config.lease_renewal != "PER_LEASE" else "")
    )
    return path


def _held(clients: AwsClients, table: str) -> defaultdict[str, set[str]]:
    """owner -> the unfinished leases it holds (none while a starved host has not created the table)."""
    leases: defaultdict[str, set[str]] = defaultdict(set)
    try:
        items = clients.dynamodb.scan(TableName=table, ConsistentRead=True)["Items"]
    except clients.dynamodb.exceptions.ResourceNotFoundException:
        return leases
    for item in items:
        owner = item.get("leaseOwner", {}).get("S")
        if owner and item.get("checkpoint", {}).get("S") != "SHARD_END":
            leases[owner].add(item["leaseKey"]["S"])
    return leases


def _read_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a SIGKILL
    return out


class _TablePoller(threading.Thread):
    """Reads the lease table (consistently, not through the proxy) every ``period_s``: each lease's
    owner over time, to tell whether a worker gave a lease up while the table still named it."""

    def __init__(self, clients: AwsClients, table: str, period_s: float = 0.2) -> None:
        super().__init__(name="chaos-table-poller", daemon=True)
        self.clients, self.table, self.period_s = clients, table, period_s
        self.timeline: dict[str, list[tuple[float, str | None]]] = defaultdict(list)  # every poll
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.period_s):
            try:
                pages = self.clients.dynamodb.get_paginator("scan").paginate(
                    TableName=self.table, ConsistentRead=True
                )
                items = [item for page in pages for item in page["Items"]]
            except Exception:  # noqa: BLE001, S112 - the table may not exist yet
                continue
            now = time.time()
            for item in items:
                self.timeline[item["leaseKey"]["S"]].append((now, item.get("leaseOwner", {}).get("S")))

    def owner_at(self, key: str, when: float) -> str | None:
        """The owner the last poll at or before ``when`` saw."""
        line = self.timeline.get(key, [])
        i = bisect.bisect_right([t for t, _ in line], when) - 1
        return line[i][1] if i >= 0 else None

    def owner_after(self, key: str, when: float) -> str | None:
        """The owner the first poll at or after ``when`` saw (a stalled poller never vouches for later)."""
        line = self.timeline.get(key, [])
        i = bisect.bisect_left([t for t, _ in line], when)
        return line[i][1] if i < len(line) else None


_LOST = re.compile(r"lease (\S+) lost: (.*)$")


def dropped_while_named(logs: dict[str, str], poller: _TablePoller) -> int:
    """Leases a worker said it lost while the table named it just before and 0.3 s after (time for a write
    of ours still in flight to land): the drops issue 17 is about."""
    count = 0
    for name, text in logs.items():
        for line in text.splitlines():
            lost, when = _LOST.search(line), log_time(line)
            if lost is None or when is None:
                continue
            key = lost[1]
            if poller.owner_at(key, when) == name and poller.owner_after(key, when + 0.3) == name:
                count += 1
    return count


def own_deletions_lost(logs: dict[str, str]) -> int:
    """Leases a worker said it lost because they were deleted, where its own cleanup deleted them: a
    finished shard's lease must leave the keeper quietly (issue 28, point 5)."""
    count = 0
    for text in logs.values():
        deleted = set(re.findall(r"lease (\S+) deleted: ", text))
        lost = re.findall(r"lease (\S+) lost: .*the lease was deleted", text)
        count += sum(1 for key in lost if key in deleted)
    return count


def late_deliveries(lines: list[dict[str, Any]]) -> int:
    """Records a worker delivered on a shard after a newer owner (a child initialized there after the
    worker's own) had delivered a record of that shard: an old owner still delivering once the new one
    is. (A new owner's child may be initialized earlier: a stolen lease's records wait for the victim to
    notice.)"""
    inits: dict[str, list[tuple[float, str]]] = defaultdict(list)
    firsts: dict[tuple[str, str, float], float] = {}  # (shard, worker, its init) -> its first record
    for line in lines:
        if line["event"] == "initialize":
            inits[line["shard"]].append((line["t"], line["worker"]))
        elif line["event"] == "record":
            own = [t for t, w in inits.get(line["shard"], []) if w == line["worker"] and t <= line["t"]]
            if own:
                firsts.setdefault((line["shard"], line["worker"], max(own)), line["t"])
    late = 0
    for line in lines:
        if line["event"] != "record":
            continue
        own = [t for t, w in inits.get(line["shard"], []) if w == line["worker"] and t <= line["t"]]
        if own and any(
            shard == line["shard"] and worker != line["worker"] and init > max(own) and first < line["t"]
            for (shard, worker, init), first in firsts.items()
        ):
            late += 1
    return late


def _leader_at(log: str, when: float) -> bool:
    leading = False
    for line in log.splitlines():
        stamp = log_time(line)
        if stamp is None or stamp > when:
            break
        if " is now leader" in line:
            leading = True
        elif " is no longer leader" in line:
            leading = False
    return leading


def run_chaos(
    config: ChaosConfig,
    kinesis_endpoint: str,
    dynamodb_endpoint: str,
    workdir: Path,
    say: Callable[[str], None] = lambda _: None,
) -> ChaosReport:
    rng = random.Random(config.seed)
    mode = config.lease_mode + ("" if config.lease_renewal == "PER_LEASE" else f"+{config.lease_renewal}")
    report = ChaosReport(config.seed, mode=mode, hog=config.cpu_hog)
    started = time.monotonic()
    clients = build_clients(ClientSettings(REGION, kinesis_endpoint, dynamodb_endpoint, read_timeout_s=10))
    stream = f"chaos-{uuid.uuid4().hex[:8]}"
    table = f"chaos-{uuid.uuid4().hex[:8]}"
    records = workdir / "records.jsonl"
    clients.kinesis.create_stream(StreamName=stream, ShardCount=config.shards)
    wait_for_stream(clients, stream, timeout_s=30.0)
    daemons: dict[str, Daemon] = {}
    killed = report.killed
    poller = _TablePoller(clients, table)
    hogs: list[subprocess.Popen[bytes]] = []
    with FaultProxy(dynamodb_endpoint, seed=config.seed) as proxy:

        def start(name: str) -> None:
            props = _properties(
                workdir / f"{name}.properties", name, table, stream, kinesis_endpoint, proxy.endpoint, config
            )
            daemons[name] = Daemon(
                "run",
                properties=props,
                log=workdir / f"{name}.log",
                name=name,
                env={"KCL_TEST_RECORDS": str(records), "KCL_TEST_WORKER": name},
                cwd=props.parent,
            )

        try:
            if config.cpu_hog:
                busy = [sys.executable, "-c", "while True: pass"]
                hogs = [subprocess.Popen(busy) for _ in range(os.cpu_count() or 2)]
            for i in range(config.daemons):
                start(f"w{i + 1}")
            poller.start()
            producer = _Producer(clients, stream, config, rng)
            duration = config.records / config.rate_per_s
            plan: list[tuple[float, str]] = [
                (rng.uniform(0.10, 0.25) * duration, "split"),
                (rng.uniform(0.65, 0.85) * duration, "merge"),
            ]
            if not config.reshard:
                plan = []
            span = 0.7 / config.fault_windows
            plan += [
                (rng.uniform(0.2 + i * span, 0.2 + (i + 0.5) * span) * duration, "faults-on")
                for i in range(config.fault_windows)
            ]
            plan += [(rng.uniform(0.35, 0.6) * duration, "kill") for _ in range(config.kills)]
            plan.sort()
            t0 = time.monotonic()
            producer.start()
            faults_off_at: float | None = None
            kill_times: dict[str, float] = {}
            victims_leases: dict[str, set[str]] = {}
            leaders_killed: set[str] = set()
            pending_restart: list[tuple[float, str]] = []
            while plan or faults_off_at is not None or pending_restart:
                now = time.monotonic() - t0
                if faults_off_at is not None and now >= faults_off_at:
                    proxy.clear()
                    report.events.append(f"{now:.1f}s faults off")
                    faults_off_at = None
                for due, name in list(pending_restart):
                    if now >= due:
                        pending_restart.remove((due, name))
                        start(name)
                        report.events.append(f"{now:.1f}s started {name}")
                if plan and now >= plan[0][0]:
                    _, what = plan.pop(0)
                    if what == "split":
                        report.events.append(f"{now:.1f}s {_split(clients, stream, rng)}")
                    elif what == "merge":
                        report.events.append(f"{now:.1f}s {_merge(clients, stream, rng)}")
                    elif what == "faults-on":
                        if not any(_held(clients, table).values()):  # a starved host: nothing to disturb yet
                            bisect.insort(plan, (now + 1.0, what))
                            continue
                        proxy.set_rules(*_fault_rules(rng))
                        faults_off_at = now + config.fault_window_s
                        report.events.append(f"{now:.1f}s faults on for {config.fault_window_s:.0f}s")
                    elif what == "kill":
                        live = sorted(
                            n for n, d in daemons.items() if d.exit_status is None and n not in killed
                        )
                        leases = _held(clients, table)
                        if not any(leases[n] for n in live):  # nothing held yet: a kill would test nothing
                            bisect.insort(plan, (now + 1.0, what))
                            continue
                        # a victim without leases would measure no takeover: pick among those with some
                        victim = rng.choice([n for n in live if leases[n]] or live)
                        owned = leases[victim]
                        daemons[victim].send(signal.SIGKILL)
                        kill_times[victim] = time.time()
                        if daemons[victim].log is not None and _leader_at(
                            daemons[victim].log.read_text(errors="replace"), kill_times[victim]
                        ):
                            report.leader_killed += 1
                            leaders_killed.add(victim)
                        victims_leases[victim] = owned
                        killed.add(victim)
                        report.events.append(f"{now:.1f}s SIGKILL {victim} ({len(owned)} leases)")
                        pending_restart.append((now + 2.0, f"{victim}-r"))
                time.sleep(0.05)
            producer.join()
            if producer.error is not None:
                raise producer.error
            produced = set(producer.accepted)
            report.produced = len(produced)
            say(f"produced {report.produced} records; waiting for all of them to be delivered")
            limit = time.monotonic() + config.settle_limit_s
            while time.monotonic() < limit:
                delivered = {r["data"] for r in _read_records(records) if r["event"] == "record"}
                if produced <= delivered:
                    break
                time.sleep(0.5)
            time.sleep(1.0)  # anything in flight lands now
        finally:
            proxy.clear()
            for hog in hogs:
                hog.kill()
                hog.wait()
            # a daemon restarted moments ago may still be importing, before its signal handlers: a
            # SIGTERM then kills it (-15); give each up to 20 s to log its start first
            started_by = time.monotonic() + 20.0
            for daemon in daemons.values():
                while (
                    daemon.exit_status is None
                    and daemon.log is not None
                    and " starting: " not in daemon.log.read_text(errors="replace")
                    and time.monotonic() < started_by
                ):
                    time.sleep(0.1)
                daemon.send(signal.SIGTERM)
            for name, daemon in daemons.items():
                report.exit_codes[name] = daemon.wait(40)  # None: killed after 40 s
            report.faults = Counter()
            for (_, fault, phase), n in proxy.injected.items():
                report.faults[f"{fault}/{phase}" if fault != "latency" else fault] += n
            report.dynamodb_calls = sum(proxy.calls.values())
            poller.stop.set()
            if poller.is_alive():
                poller.join(5)
            clients.kinesis.delete_stream(StreamName=stream)
            try:
                clients.dynamodb.delete_table(TableName=table)
            except Exception as exc:  # noqa: BLE001 - cleanup only
                say(f"could not delete table {table}: {exc}")
    logs = {name: daemon.log.read_text(errors="replace") for name, daemon in daemons.items()}
    report.tracebacks = sum(text.count("Traceback") for text in logs.values())
    lines = _read_records(records)
    deliveries: dict[str, list[dict[str, Any]]] = defaultdict(list)
    since: dict[tuple[str, str], float] = {}
    for line in lines:
        if line["event"] == "initialize":
            since[(line["worker"], line["shard"])] = line["t"]
        elif line["event"] == "record":
            line["since"] = since.get((line["worker"], line["shard"]), float("inf"))
            deliveries[line["data"]].append(line)
    takes = {name: parse_takes(text) for name, text in logs.items()}
    report.expired_leases = sum(
        len(re.findall(r"lease \S+ lost: not renewed", text)) for text in logs.values()
    )
    report.dropped_while_named = dropped_while_named(logs, poller)
    report.own_deletions_lost = own_deletions_lost(logs)
    report.late_old_owner = late_deliveries(lines)
    report.delivered = len(deliveries)
    report.lost = sorted(set(producer.accepted) - set(deliveries))
    for copies in deliveries.values():
        for first, second in itertools.pairwise(copies):
            reason = classify(first, second, killed, takes, config.failover_s)
            report.duplicates[reason] += 1
            if reason not in ALLOWED_REASONS and len(report.unexplained) < 5:
                report.unexplained.append(f"{reason}: {describe(first, second, takes)}")
    for victim, owned in victims_leases.items():
        for shard in owned:
            after = [
                r["t"]
                for r in lines
                if r["event"] == "initialize" and r["shard"] == shard and r["worker"] != victim
                and r["t"] > kill_times[victim]
            ]  # fmt: skip
            if after:
                report.takeover_s.append(min(after) - kill_times[victim])
            resumed = [
                r["t"]
                for r in lines
                if r["event"] == "record" and r["shard"] == shard and r["worker"] != victim
                and r["t"] > kill_times[victim]
            ]  # fmt: skip
            if resumed:
                report.resumed_s.append(min(resumed) - kill_times[victim])
                leaderless = any(
                    abs(kill_times[leader] - kill_times[victim]) <= config.failover_s
                    for leader in leaders_killed
                )
                if leaderless:
                    report.resumed_leader_s.append(min(resumed) - kill_times[victim])
    report.wall_s = time.monotonic() - started
    return report
