"""`kcl-daemon doctor`'s shell: every read the checks need, then the checks in order.

Reads only, plus the harmless IAM tries of :mod:`kcl_daemon.aws.probes` (writes conditioned to fail on
a key no lease has). The lease table is scanned twice, ``wait_s`` apart (default: the failover time), as
``kcl-daemon leases --check-expiry`` does and with its code (:mod:`kcl_daemon.inspection.table`): a
lease whose counter did not move meanwhile is expired; the ``Leader`` lock is read before and after
the wait to see its heartbeat. For each owned, live lease the first record after its checkpoint is
read (``Limit=1``) to tell how long it has been waiting. A read that fails becomes part of its check's
result instead of stopping the others.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kcl_daemon.aws import iam, probes
from kcl_daemon.aws.clients import AwsClients, build_clients, client_settings_from
from kcl_daemon.aws.coordinator_state import COORDINATOR_KEY, LEASE_TABLE_KEY, CoordinatorStore
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lease_table import LEASE_OWNER_INDEX, DynamoLeaseTable, ScanResult
from kcl_daemon.clock import Clock, SystemClock
from kcl_daemon.config.settings import Settings
from kcl_daemon.core.leader.client_version import ClientVersion, ClientVersionConfig, parse_client_version
from kcl_daemon.core.leader.table_names import legacy_table_names
from kcl_daemon.core.leader.worker_metrics import LAST_UPDATE, WORKER_ID
from kcl_daemon.core.leader.zones import EXTRA_ATTRIBUTE
from kcl_daemon.core.leases.heartbeat import BEAT
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import Sentinel
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from kcl_daemon.core.shards.multi_stream import parse_stream_list
from kcl_daemon.doctor import checks
from kcl_daemon.doctor.facts import (
    CredentialFacts,
    LayoutFacts,
    LeaderFacts,
    LeaseFacts,
    MetricsRow,
    Outcome,
    ProbeResult,
    StreamFacts,
    TableDescription,
    WorkerMetricsFacts,
)
from kcl_daemon.doctor.findings import DoctorReport
from kcl_daemon.errors import ConfigError, DependencyUnavailable, KclError
from kcl_daemon.inspection.stream_shards import configured_shard_lister
from kcl_daemon.inspection.table import inspect_lease_table
from kcl_daemon.metrics.runtime import cloudwatch_decision
from kcl_daemon.retry import KINESIS

logger = logging.getLogger(__name__)
T = TypeVar("T")

LEADER_KEY = "Leader"
MIGRATION_KEY = "Migration3.0"
TABLE_MIGRATION_KEY = "TableMigration3.5"
COORDINATOR_ITEMS = (LEADER_KEY, MIGRATION_KEY, TABLE_MIGRATION_KEY)
#: Leases whose first unprocessed record is looked up (one GetShardIterator + GetRecords each).
MAX_RECORD_PROBES = 200


@dataclass(frozen=True, slots=True)
class Names:
    lease_table: str
    coordinator_table: str
    metrics_table: str
    streams: tuple[str, ...]


def names_of(settings: Settings) -> Names:
    table = settings.lease_table_name
    if table is None:
        raise ConfigError(["doctor needs applicationName or tableName"])
    if settings.stream_names:
        streams = tuple(spec.name for spec in parse_stream_list(settings.stream_names))
    else:
        stream = settings.effective_stream_name
        streams = () if stream is None else (stream,)
    side = legacy_table_names(
        settings.application_name,
        table,
        coordinator_state=settings.coordinator_state_table_name,
        worker_metrics=settings.worker_metrics_table_name,
    )
    return Names(table, side.coordinator_state, side.worker_metrics, streams)


def run_doctor(
    settings: Settings, *, wait_s: float | None = None, clock: Clock | None = None
) -> DoctorReport:
    """Read everything, run every check, in order; ``wait_s`` (default ``failoverTimeMillis``) apart."""
    wait = settings.failover_s if wait_s is None else wait_s
    return asyncio.run(_doctor(settings, wait, clock or SystemClock()))


async def _doctor(settings: Settings, wait_s: float, clock: Clock) -> DoctorReport:
    names = names_of(settings)
    client_settings = client_settings_from(settings)
    found = await asyncio.to_thread(probes.identity, client_settings)
    credentials = CredentialFacts(
        found.region, found.method, found.anonymous, found.arn, found.error, found.checked
    )
    clients = build_clients(client_settings)
    streams = [await asyncio.to_thread(_stream_facts, clients, name) for name in names.streams]
    table = await asyncio.to_thread(_table_description, clients, names.lease_table)
    no_items: list[dict[str, object]] = []
    raw, raw_error = await _read(
        lambda: _raw_scan(clients, names.lease_table) if table.exists else no_items, no_items
    )
    legacy_exists, legacy_error = await _read(
        CoordinatorStore(clients.dynamodb, names.coordinator_table).exists, False
    )
    none_found: dict[str, Mapping[str, object]] = {}
    legacy_items, items_error = await _read(
        lambda: _items(clients, names.coordinator_table, COORDINATOR_KEY) if legacy_exists else none_found,
        none_found,
    )
    lease_items = {
        str(item.get(LEASE_TABLE_KEY)): item for item in raw if item.get(LEASE_TABLE_KEY) in COORDINATOR_ITEMS
    }
    stored = _client_version(legacy_items, lease_items)
    configured = ClientVersionConfig(settings.client_version_config)
    leader_mode = stored in (ClientVersion.V3X, ClientVersion.V3X_WITH_ROLLBACK) or (
        stored is None and configured is ClientVersionConfig.V3X
    )
    legacy_layout = legacy_exists or not lease_items
    metrics_store = CoordinatorStore(clients.dynamodb, names.metrics_table, WORKER_ID)
    metrics_exists, metrics_error = await _read(metrics_store.exists, False)
    metrics_raw, scan_error = await _read(
        lambda: metrics_store.scan() if metrics_exists else no_items, no_items
    )
    metrics_rows = tuple(
        [_metrics_row(item, names.metrics_table, WORKER_ID) for item in metrics_raw]
        + [
            _metrics_row(item, names.lease_table, LEASE_TABLE_KEY)
            for item in raw
            if item.get("entityType") == "WORKER_METRIC_STATS"
        ]
    )
    lease_raw = [item for item in raw if item.get("entityType") in (None, "LEASE") and "leaseCounter" in item]
    owners = frozenset(str(item["leaseOwner"]) for item in lease_raw if item.get("leaseOwner"))

    results = [checks.check_credentials(credentials), checks.check_streams(streams)]
    results.append(checks.check_lease_table(table, leader_mode=leader_mode))
    results.append(
        checks.check_layout(
            LayoutFacts(
                names.lease_table,
                names.coordinator_table,
                legacy_exists,
                lease_items,
                legacy_items,
                metrics_rows,
                owners,
                sum(1 for item in lease_raw if item.get("entityType") == "LEASE"),
                sum(1 for item in lease_raw if "entityType" not in item),
                time.time(),
                settings.worker_metrics_report_s,
                raw_error or legacy_error or items_error,
                names.metrics_table,
                metrics_exists if metrics_error is None else None,
            )
        )
    )
    needs = _needs(settings, configured, stored, legacy_layout)
    results.append(checks.check_iam(await asyncio.to_thread(_try_actions, clients, names, needs, settings)))

    # the observation window: the Leader lock and the leases, read before and after it
    lock_place, lock_key = (
        (names.coordinator_table, COORDINATOR_KEY) if legacy_exists else (names.lease_table, LEASE_TABLE_KEY)
    )
    lock_store = CoordinatorStore(clients.dynamodb, lock_place, lock_key)
    first_lock, lock_error = await _read_lock(lock_store)
    lease_facts = await _lease_facts(settings, clients, names, table.exists, wait_s, clock)
    second_lock, second_error = await _read_lock(lock_store)
    results.append(checks.check_leases(lease_facts))
    now = time.time()
    live = {
        row.worker_id
        for row in metrics_rows
        if row.last_update_s and now - row.last_update_s <= 2 * settings.worker_metrics_report_s
    }
    if lease_facts.distribution is not None and lease_facts.distribution.expired is not None:
        expired = set(lease_facts.distribution.expired)
        live |= {
            lease.lease_owner
            for lease in lease_facts.leases
            if lease.lease_owner and lease.lease_key not in expired
        }
    results.append(
        checks.check_leader(
            LeaderFacts(
                leader_mode,
                lock_place,
                lock_key,
                first_lock,
                second_lock,
                wait_s,
                frozenset(live),
                lock_error or second_error,
            )
        )
    )
    metrics_place, metrics_key = (
        (names.metrics_table, WORKER_ID)
        if metrics_exists or legacy_layout
        else (names.lease_table, LEASE_TABLE_KEY)
    )
    results.append(
        checks.check_worker_metrics(
            WorkerMetricsFacts(
                metrics_place,
                metrics_exists or any(row.place == names.lease_table for row in metrics_rows),
                metrics_key,
                metrics_rows,
                now,
                settings.worker_metrics_report_s,
                leader_mode=leader_mode,
                lease_owners=owners,
                error=metrics_error or scan_error,
            )
        )
    )
    return DoctorReport(tuple(results))


async def _read(read: Callable[[], T], default: T) -> tuple[T, str | None]:
    """``read()`` on a thread; on a failure (access denied, say) the default and what went wrong, so one
    unreadable table never hides what the other checks find."""
    try:
        return await asyncio.to_thread(read), None
    except KclError as exc:
        return default, str(exc)


def _stream_facts(clients: AwsClients, name: str) -> StreamFacts:
    summary = probes.describe_stream(clients.kinesis, name)
    if isinstance(summary, probes.Tried):
        return StreamFacts(name, error=summary.detail)
    if summary is None:
        return StreamFacts(name)
    return StreamFacts(
        name,
        str(summary.get("StreamStatus")),
        summary.get("OpenShardCount"),
        summary.get("RetentionPeriodHours"),
    )


def _table_description(clients: AwsClients, name: str) -> TableDescription:
    table = probes.describe_table(clients.dynamodb, name)
    if isinstance(table, probes.Tried):
        return TableDescription(name, False, error=f"cannot describe table {name}: {table.detail}")
    if table is None:
        return TableDescription(name, False)
    indexes = {
        str(index["IndexName"]): (
            str(index.get("IndexStatus", "ACTIVE")),
            tuple((str(k["AttributeName"]), str(k["KeyType"])) for k in index.get("KeySchema", [])),
        )
        for index in table.get("GlobalSecondaryIndexes", [])
    }
    throughput = table.get("ProvisionedThroughput") or {}
    billing = (table.get("BillingModeSummary") or {}).get("BillingMode")
    if billing is None:
        billing = "PROVISIONED" if throughput.get("ReadCapacityUnits") else "PAY_PER_REQUEST"
    return TableDescription(
        name,
        True,
        str(table.get("TableStatus")),
        tuple((str(k["AttributeName"]), str(k["KeyType"])) for k in table.get("KeySchema", [])),
        {str(a["AttributeName"]): str(a["AttributeType"]) for a in table.get("AttributeDefinitions", [])},
        indexes,
        str(billing),
        throughput.get("ReadCapacityUnits") or None,
        throughput.get("WriteCapacityUnits") or None,
    )


def _raw_scan(clients: AwsClients, table: str) -> list[dict[str, object]]:
    return CoordinatorStore(clients.dynamodb, table, LEASE_TABLE_KEY).scan()


def _items(clients: AwsClients, table: str, key_name: str) -> dict[str, Mapping[str, object]]:
    store = CoordinatorStore(clients.dynamodb, table, key_name)
    found: dict[str, Mapping[str, object]] = {}
    for key in COORDINATOR_ITEMS:
        item = store.get(key)
        if item is not None:
            found[key] = item
    return found


def _client_version(
    legacy: Mapping[str, Mapping[str, object]], single: Mapping[str, Mapping[str, object]]
) -> ClientVersion | None:
    item = legacy.get(MIGRATION_KEY) or single.get(MIGRATION_KEY)
    if item is None:
        return None
    try:
        return parse_client_version(item.get("cv"))  # type: ignore[arg-type]
    except ValueError:
        return None


def _metrics_row(item: Mapping[str, object], place: str, key_name: str) -> MetricsRow:
    worker = str(item.get(key_name, "?"))
    lut = item.get(LAST_UPDATE)
    sup = item.get("sup")
    problem = None
    if lut is not None and not isinstance(lut, int | float):
        problem, lut = f"{worker}: lut is not a number: {lut!r}", None
    if BEAT in item and lut == 0:
        lut = None  # a heartbeat's placeholder (leaseRenewal = PER_WORKER), no metrics report
    return MetricsRow(
        worker,
        None if lut is None else float(lut),
        place,
        kcl_daemon=EXTRA_ATTRIBUTE in item or BEAT in item,
        support_code=int(sup) if isinstance(sup, int | float) else None,
        problem=problem,
        heartbeat=BEAT in item,
    )


def _needs(
    settings: Settings, configured: ClientVersionConfig, stored: ClientVersion | None, legacy_layout: bool
) -> frozenset[iam.Need]:
    needs = {iam.Need.ALWAYS}
    writes_state = configured is not ClientVersionConfig.COMPATIBLE_WITH_2X_PHASE1 or stored not in (
        None,
        ClientVersion.INIT,
    )
    if writes_state:
        needs.add(iam.Need.MIGRATION_STATE)
    if stored in (ClientVersion.V3X, ClientVersion.V3X_WITH_ROLLBACK, ClientVersion.UPGRADE_FROM_2X) or (
        stored is None and configured is ClientVersionConfig.V3X
    ):
        needs.add(iam.Need.LEADER)
    if legacy_layout:
        needs.add(iam.Need.LEGACY_TABLES)
    if settings.effective_retrieval_mode == "FANOUT":
        needs.add(iam.Need.FANOUT)
    if cloudwatch_decision(settings.metrics(), local=False)[0]:
        needs.add(iam.Need.CLOUDWATCH)
    if settings.lease_renewal == "PER_WORKER":
        needs.add(iam.Need.PER_WORKER)
    return frozenset(needs)


def _try_actions(
    clients: AwsClients, names: Names, needs: frozenset[iam.Need], settings: Settings
) -> list[ProbeResult]:
    tables = {
        iam.Resource.LEASE_TABLE: (names.lease_table, LEASE_TABLE_KEY),
        iam.Resource.LEASE_TABLE_INDEX: (names.lease_table, LEASE_TABLE_KEY),
        iam.Resource.COORDINATOR_TABLE: (names.coordinator_table, COORDINATOR_KEY),
        iam.Resource.WORKER_METRICS_TABLE: (names.metrics_table, WORKER_ID),
    }
    consumer = settings.fanout_consumer_name or settings.application_name
    results: list[ProbeResult] = []
    for row in iam.actions_for(needs):
        service, _, action = row.action.partition(":")
        tried: probes.Tried | None = None
        if row.resource in tables:
            table, key_name = tables[row.resource]
            index = LEASE_OWNER_INDEX if row.resource is iam.Resource.LEASE_TABLE_INDEX else None
            where = table if index is None else f"{table}/index/{index}"
            if service == "dynamodb":
                tried = probes.try_dynamodb(clients.dynamodb, action, table, key_name, index)
            results.append(_probe_result(row.action, where, tried))
            continue
        if row.resource in (iam.Resource.STREAM, iam.Resource.STREAM_CONSUMER) and names.streams:
            for stream in names.streams:
                tried = probes.try_kinesis(clients.kinesis, action, stream, consumer)
                where = stream if row.resource is iam.Resource.STREAM else f"{stream} consumer {consumer}"
                results.append(_probe_result(row.action, where, tried))
            continue
        results.append(_probe_result(row.action, str(row.resource), None))
    return results


def _probe_result(action: str, where: str, tried: probes.Tried | None) -> ProbeResult:
    if tried is None:
        return ProbeResult(action, where, Outcome.NOT_TRIED, "cannot be tried without an effect")
    return ProbeResult(action, where, Outcome(tried.outcome), tried.detail)


async def _read_lock(store: CoordinatorStore) -> tuple[Mapping[str, object] | None, str | None]:
    try:
        return await asyncio.to_thread(store.get, LEADER_KEY), None
    except DependencyUnavailable:
        return None, None
    except KclError as exc:
        return None, str(exc)


async def _lease_facts(
    settings: Settings, clients: AwsClients, names: Names, exists: bool, wait_s: float, clock: Clock
) -> LeaseFacts:
    failover, stall = settings.failover_s, settings.shard_stall_s
    if not exists:
        return LeaseFacts(names.lease_table, None, failover_s=failover, stall_limit_s=stall)
    table = DynamoLeaseTable(clients.dynamodb, names.lease_table, heartbeat_table=names.metrics_table)
    kinesis = Kinesis(clients.kinesis)
    lister = configured_shard_lister(settings.shards(), clients.kinesis, kinesis)
    listed: list[Shard] = []

    def list_shards() -> Sequence[Shard]:
        assert lister is not None
        listed[:] = lister()
        return listed

    scans: list[tuple[Lease, ...]] = []

    def scan() -> ScanResult:
        found = table.list_leases(consistent=True)
        # with the heartbeats (leaseRenewal = PER_WORKER): a lease they keep is not expired while they
        # move. A fleet renewing per lease may not be allowed to read their table: then without them.
        try:
            found = ScanResult(found.leases, found.skipped, (*found.workers, *table.heartbeat_items()))
        except KclError as exc:
            logger.debug("heartbeats not read: %s", exc)
        scans.append(tuple(found.leases))
        return found

    try:
        report = await inspect_lease_table(
            names.lease_table,
            scan,
            list_shards=list_shards if lister is not None else None,
            clock=clock,
            expiry_wait_s=wait_s if wait_s > 0 else None,
            cluster_separator=settings.lease_cluster_separator,
        )
    except KclError as exc:
        return LeaseFacts(names.lease_table, None, error=str(exc), failover_s=failover, stall_limit_s=stall)
    leases = scans[-1] if scans else ()
    expired = set(report.distribution.expired or ())
    ages = await asyncio.to_thread(_oldest_unprocessed, kinesis, settings, leases, expired)
    return LeaseFacts(
        names.lease_table,
        report.distribution,
        leases,
        report.skipped_items,
        wait_s,
        failover,
        tuple(listed) if lister is not None and report.shard_list_error is None else None,
        report.shard_list_error,
        ages,
        stall,
    )


def _oldest_unprocessed(
    kinesis: Kinesis, settings: Settings, leases: Sequence[Lease], expired: set[str]
) -> dict[str, float]:
    """lease key -> seconds since the first record after its checkpoint arrived (live, owned leases)."""
    ages: dict[str, float] = {}
    candidates = [
        lease
        for lease in leases
        if lease.lease_owner is not None and not lease.is_shard_end and lease.lease_key not in expired
    ][:MAX_RECORD_PROBES]
    now_ms = time.time() * 1000
    for lease in candidates:
        position = _after_checkpoint(lease)
        stream = _stream_of(lease, settings)
        if position is None or stream is None:
            continue
        try:
            arrival = _first_arrival(kinesis, stream, lease.shard_id, position)
        except KclError as exc:
            logger.debug("lease %s: cannot read after its checkpoint: %s", lease.lease_key, exc)
            continue
        if arrival is not None:
            ages[lease.lease_key] = max(now_ms - arrival, 0.0) / 1000
    return ages


def _after_checkpoint(lease: Lease) -> IteratorPosition | None:
    checkpoint = lease.checkpoint
    if checkpoint.sequence_number == Sentinel.TRIM_HORIZON:
        return IteratorPosition(IteratorType.TRIM_HORIZON)
    if checkpoint.is_sentinel:
        return None  # LATEST / AT_TIMESTAMP: no record is owed yet
    kind = (
        IteratorType.AT_SEQUENCE_NUMBER
        if checkpoint.sub_sequence_number
        else IteratorType.AFTER_SEQUENCE_NUMBER
    )
    return IteratorPosition(kind, sequence_number=checkpoint.sequence_number)


def _stream_of(lease: Lease, settings: Settings) -> str | None:
    if lease.stream is not None:
        return lease.stream.split(":")[1]
    return settings.effective_stream_name


def _first_arrival(kinesis: Kinesis, stream: str, shard_id: str, position: IteratorPosition) -> float | None:
    iterator: str | None = KINESIS.call(kinesis.get_shard_iterator, stream, shard_id, position)
    for _ in range(5):  # a sparse shard may answer a few empty pages before its first record
        if iterator is None:
            return None
        page = KINESIS.call(kinesis.get_records, iterator, 1)
        if page.records:
            return float(page.records[0].approximate_arrival_timestamp)
        if not page.millis_behind_latest:
            return None
        iterator = page.next_iterator
    return None
