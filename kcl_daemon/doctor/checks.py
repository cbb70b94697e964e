"""The checks of `kcl-daemon doctor`, in the order they run: each a pure function from what was read
(:mod:`kcl_daemon.doctor.facts`) to a :class:`CheckResult` with its facts and findings.

1. credentials and region
2. the stream(s)
3. the lease table: existence, key schema, the GSI, billing mode
4. the table layout, migration state and the versions seen in the fleet
5. the IAM actions the configuration needs
6. leases: expired, unowned, stuck; shards without leases, leases without shards
7. the leader lock
8. worker-metrics items

Pure: no I/O, no clock (times come in the facts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kcl_daemon.core.leader.layout import TableFacts, describe_layout
from kcl_daemon.core.leader.leader_lock import parse_lock
from kcl_daemon.core.leader.table_migration import MetricsRow as LayoutMetricsRow
from kcl_daemon.core.leader.table_migration import Place
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.shards.graph import Shard
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
from kcl_daemon.doctor.findings import CheckResult, Finding, Severity, result

ERROR, WARNING = Severity.ERROR, Severity.WARNING
LEASE_KEY = "leaseKey"
OWNER_INDEX = "LeaseOwnerToLeaseKeyIndex"
#: A lease that moved this many times without a checkpoint is going round the fleet unprocessed.
OWNER_SWITCH_LIMIT = 3
_USABLE_STREAM = ("ACTIVE", "UPDATING")


def check_credentials(facts: CredentialFacts) -> CheckResult:
    title = "credentials and region"
    found: list[Finding] = []
    lines = [f"region: {facts.region or 'none'}"]
    if facts.error is not None:
        found.append(Finding(ERROR, facts.error, "fix the credentials or region settings it names"))
    if facts.region is None:
        found.append(
            Finding(
                ERROR, "no AWS region", "set regionName, or AWS_DEFAULT_REGION, or region in ~/.aws/config"
            )
        )
    if facts.anonymous:
        lines.append("credentials: ANONYMOUS (requests are not signed)")
    elif facts.method is None:
        found.append(
            Finding(
                ERROR,
                "no credentials found by the configured provider chain",
                "give the worker credentials: an instance profile, a task or pod role (IRSA, EKS Pod "
                "Identity), AWS_PROFILE, or set AWSCredentialsProvider",
            )
        )
    else:
        lines.append(f"credentials: found by {facts.method}")
    if facts.identity_arn is not None:
        lines.append(f"identity: {facts.identity_arn}")
    elif facts.identity_error is not None:
        found.append(
            Finding(
                ERROR,
                f"the credentials were rejected: {facts.identity_error}",
                "the credentials are expired or invalid: refresh them (aws sts get-caller-identity shows it)",
            )
        )
    elif not facts.identity_checked:
        lines.append("identity: not checked (custom endpoints: no STS to ask)")
    return result("credentials", title, lines, found)


def check_streams(streams: Sequence[StreamFacts]) -> CheckResult:
    title = "stream" if len(streams) == 1 else "streams"
    if not streams:
        return result("stream", title, skipped="no stream configured (streamName, streamArn or streamNames)")
    lines: list[str] = []
    found: list[Finding] = []
    for stream in streams:
        if stream.error is not None:
            found.append(
                Finding(
                    ERROR, f"stream {stream.name}: {stream.error}", "see the IAM check below", stream.name
                )
            )
            continue
        if stream.status is None:
            found.append(
                Finding(
                    ERROR,
                    f"stream {stream.name} does not exist",
                    "create it, or fix streamName/streamArn/streamNames (and regionName)",
                    stream.name,
                )
            )
            continue
        lines.append(
            f"{stream.name}: {stream.status}, {stream.open_shards} open shard(s), "
            f"retention {stream.retention_hours} h"
        )
        if stream.status not in _USABLE_STREAM:
            found.append(
                Finding(
                    ERROR,
                    f"stream {stream.name} is {stream.status}",
                    "wait until it is ACTIVE (CREATING), or re-create it (DELETING)",
                    stream.name,
                )
            )
    return result("stream", title, lines, found)


def check_lease_table(table: TableDescription, *, leader_mode: bool) -> CheckResult:
    title = f"lease table {table.name}"
    if table.error is not None:
        return result(
            "lease-table", title, findings=[Finding(ERROR, table.error, "see the IAM check", table.name)]
        )
    if not table.exists:
        return result(
            "lease-table",
            title,
            findings=[
                Finding(
                    WARNING,
                    f"lease table {table.name} does not exist yet",
                    "the first worker creates it (it needs dynamodb:CreateTable); if workers already run, "
                    "check applicationName/tableName and regionName",
                    table.name,
                )
            ],
        )
    lines = [f"status {table.status}"]
    found: list[Finding] = []
    if table.status != "ACTIVE":
        found.append(
            Finding(WARNING, f"table {table.name} is {table.status}", "wait until it is ACTIVE", table.name)
        )
    expected = ((LEASE_KEY, "HASH"),)
    if tuple(table.key_schema) != expected or table.attribute_types.get(LEASE_KEY) != "S":
        schema = ", ".join(f"{name} {kind}" for name, kind in table.key_schema) or "none"
        found.append(
            Finding(
                ERROR,
                f"key schema is {schema}; a lease table has exactly leaseKey (S) HASH",
                "this is not a KCL lease table: point tableName/applicationName at the right table",
                table.name,
            )
        )
    else:
        lines.append("key schema: leaseKey (S) HASH")
    index = table.indexes.get(OWNER_INDEX)
    if index is None:
        gsi_line = f"{OWNER_INDEX}: none"
        if leader_mode:
            found.append(
                Finding(
                    ERROR,
                    f"no {OWNER_INDEX}: KCL 3.x workers find their assigned leases through it, so none "
                    "would ever start processing",
                    f"add it: aws dynamodb update-table --table-name {table.name} --attribute-definitions "
                    "AttributeName=leaseOwner,AttributeType=S AttributeName=leaseKey,AttributeType=S "
                    '--global-secondary-index-updates \'[{"Create":{"IndexName":"' + OWNER_INDEX + '",'
                    '"KeySchema":[{"AttributeName":"leaseOwner","KeyType":"HASH"},{"AttributeName":'
                    '"leaseKey","KeyType":"RANGE"}],"Projection":{"ProjectionType":"KEYS_ONLY"}}}]\' '
                    "(with provisioned billing, add ProvisionedThroughput)",
                    table.name,
                )
            )
    else:
        status, index_schema = index
        gsi_line = f"{OWNER_INDEX}: {status}"
        if tuple(index_schema) != (("leaseOwner", "HASH"), (LEASE_KEY, "RANGE")):
            found.append(
                Finding(
                    ERROR,
                    f"{OWNER_INDEX} has the key schema {index_schema}, not leaseOwner HASH + leaseKey RANGE",
                    "delete the index and create it as KCL does (contract §3.1)",
                    table.name,
                )
            )
        elif leader_mode and status != "ACTIVE":
            found.append(
                Finding(
                    WARNING,
                    f"{OWNER_INDEX} is {status}: lease discovery fails until it is ACTIVE",
                    "wait for the index to finish building",
                    table.name,
                )
            )
    lines.append(gsi_line)
    if table.billing_mode == "PROVISIONED":
        lines.append(f"billing: PROVISIONED ({table.read_capacity} RCU, {table.write_capacity} WCU)")
    else:
        lines.append(f"billing: {table.billing_mode or 'PAY_PER_REQUEST'}")
    return result("lease-table", title, lines, found)


def check_layout(facts: LayoutFacts) -> CheckResult:
    title = "table layout, migration state and versions"
    if facts.error is not None:
        return result("layout", title, skipped=f"could not read the coordinator state: {facts.error}")
    report = describe_layout(_table_facts(facts))
    lines = report.lines()
    lines = [line for line in lines if not line.startswith("warning: ")] + _versions(facts)
    found = [
        Finding(ERROR, text, _LAYOUT_FIX) if text in report.hazards else Finding(WARNING, text, _LAYOUT_FIX)
        for text in report.warnings
    ]
    return result("layout", title, lines, found)


_LAYOUT_FIX = "see docs/migrating.md: run KCL 3.5 or later (or kcl-daemon) on every worker of this table"


def _table_facts(facts: LayoutFacts) -> TableFacts:
    """What doctor read, as the layout description takes it (contract §9.2)."""
    metrics_table = facts.metrics_table or facts.coordinator_table.replace(
        "-CoordinatorState", "-WorkerMetricStats"
    )

    def row(found: MetricsRow, place: Place) -> LayoutMetricsRow:
        # kcl-daemon supports the single-table layout whatever its item says
        support = 1 if found.kcl_daemon else found.support_code
        return LayoutMetricsRow(found.worker_id, place, found.last_update_s, support)

    legacy_rows = tuple(row(m, Place.LEGACY) for m in facts.metrics if m.place != facts.lease_table)
    exists = facts.metrics_table_exists if facts.metrics_table_exists is not None else bool(legacy_rows)
    return TableFacts(
        lease_table=facts.lease_table,
        kinds={"LEASE": facts.leases_with_entity_type + facts.leases_without_entity_type},
        lease_table_items=facts.lease_table_items,
        unmarked_non_leases=(),
        legacy_coordinator_table=facts.coordinator_table,
        legacy_items=facts.legacy_items if facts.coordinator_table_exists else None,
        legacy_metrics_table=metrics_table,
        legacy_metrics=legacy_rows if exists else None,
        lease_table_metrics=tuple(
            row(m, Place.LEASE_TABLE) for m in facts.metrics if m.place == facts.lease_table
        ),
        now_s=facts.now_s,
        reporter_period_s=facts.reporter_period_s,
    )


def _versions(facts: LayoutFacts) -> list[str]:
    """Which versions the table shows in the fleet (as far as it shows them)."""
    kinds: dict[str, list[str]] = {}
    reporters = set()
    for row in facts.metrics:
        reporters.add(row.worker_id)
        if row.kcl_daemon:
            kind = "kcl-daemon"
        elif row.support_code is not None and row.support_code >= 1:
            kind = "Java KCL 3.5+"
        else:
            kind = "Java KCL 3.0-3.4"
        kinds.setdefault(kind, []).append(row.worker_id)
    silent = sorted(facts.lease_owners - reporters)
    if silent:
        kinds.setdefault("no worker metrics (KCL 2.x, or a 2.x-compatible phase)", []).extend(silent)
    lines = [f"workers: {kind}: {', '.join(sorted(workers))}" for kind, workers in sorted(kinds.items())]
    if facts.leases_with_entity_type or facts.leases_without_entity_type:
        lines.append(
            f"leases: {facts.leases_with_entity_type} written with entityType (KCL 3.5 or kcl-daemon), "
            f"{facts.leases_without_entity_type} without (older writers)"
        )
    return lines


def check_iam(probes: Sequence[ProbeResult]) -> CheckResult:
    title = "IAM actions this configuration needs"
    lines: list[str] = []
    found: list[Finding] = []
    for probe in probes:
        line = f"{probe.action} on {probe.resource}: {probe.outcome}"
        if probe.detail:
            line += f" ({probe.detail})"
        lines.append(line)
        if probe.outcome is Outcome.DENIED:
            found.append(
                Finding(
                    ERROR,
                    f"{probe.action} on {probe.resource} is denied: {probe.detail}",
                    "grant it: the policies under deploy/iam/ list every action per lease mode and layout",
                    probe.action,
                )
            )
        elif probe.outcome is Outcome.ERROR:
            found.append(
                Finding(
                    WARNING,
                    f"trying {probe.action} on {probe.resource} failed: {probe.detail}",
                    "run doctor again; if it persists, check the endpoint and the network",
                    probe.action,
                )
            )
    return result("iam", title, lines, found)


def check_leases(facts: LeaseFacts) -> CheckResult:
    title = f"leases in {facts.table}"
    if facts.error is not None:
        return result("leases", title, skipped=f"could not read the leases: {facts.error}")
    dist = facts.distribution
    if dist is None:
        return result("leases", title, skipped="the lease table does not exist")
    leases = {lease.lease_key: lease for lease in facts.leases}
    found: list[Finding] = []
    owned = sum(1 for row in dist.rows if row.owner is not None)
    lines = [
        f"{len(dist.rows)} lease(s), {owned} owned by {len(dist.per_worker)} worker(s), "
        f"{len(dist.finished)} finished (SHARD_END)"
    ]
    for problem in facts.skipped_items:
        found.append(Finding(ERROR, f"unreadable lease item: {problem}", "repair or delete the item"))
    if dist.expired is None:
        lines.append("expiry: not checked (doctor --wait 0)")
    else:
        lines.append(
            f"expiry: judged over {facts.window_s:.0f}s (failoverTimeMillis {facts.failover_s:.0f}s)"
        )
        for key in dist.expired:
            lease = leases.get(key)
            owner = lease.lease_owner if lease else "?"
            found.append(
                Finding(
                    WARNING,
                    f"lease {key}: its owner {owner} did not renew it for {facts.window_s:.0f}s (expired)",
                    f"{owner} is dead or cut off from the table; another worker takes the lease at its next "
                    "take or assignment run. If it stays expired, no live worker is taking leases: check "
                    "the workers (kcl-daemon leases --watch, their /readyz)",
                    key,
                )
            )
    for key in dist.unclaimed:
        lease = leases.get(key)
        if lease is not None and lease.is_shard_end:
            continue
        found.append(
            Finding(
                WARNING,
                f"lease {key} has no owner",
                "no worker has taken it: are workers running, and below maxLeasesForWorker? In KCL 3.x "
                "mode the leader assigns it at its next run",
                key,
            )
        )
    found += _stuck(facts, leases)
    found += _shard_coverage(facts, leases)
    return result("leases", title, lines, found)


def _stuck(facts: LeaseFacts, leases: Mapping[str, Lease]) -> list[Finding]:
    found = []
    for key, lease in sorted(leases.items()):
        if lease.lease_owner is None or lease.is_shard_end:
            continue
        if lease.owner_switches_since_checkpoint >= OWNER_SWITCH_LIMIT:
            found.append(
                Finding(
                    WARNING,
                    f"lease {key} changed owner {lease.owner_switches_since_checkpoint} times without a "
                    f"checkpoint (at {lease.checkpoint})",
                    "workers keep losing it before they checkpoint: a record the processor cannot get past "
                    "(it crashes or times out on it), or workers that die. Read the workers' logs for this "
                    "shard; `kcl-daemon checkpoint set` can move it past a bad record",
                    key,
                )
            )
            continue
        age = facts.oldest_unprocessed_s.get(key)
        if age is not None and facts.stall_limit_s > 0 and age >= facts.stall_limit_s:
            found.append(
                Finding(
                    WARNING,
                    f"lease {key} is stuck at {lease.lease_owner}: the first record after its checkpoint "
                    f"({lease.checkpoint}) arrived {age:.0f}s ago "
                    f"(shardStallMillis {facts.stall_limit_s:.0f}s)",
                    f"{lease.lease_owner} renews the lease but does not get through the shard: look at that "
                    "worker's /readyz and its processor's log for this shard",
                    key,
                )
            )
    return found


def _shard_coverage(facts: LeaseFacts, leases: Mapping[str, Lease]) -> list[Finding]:
    if facts.shards is None:
        if facts.shard_error:
            return [
                Finding(
                    WARNING, f"cannot list the stream's shards: {facts.shard_error}", "see the stream check"
                )
            ]
        return []
    found = []
    # several streams: the shards are listed by lease key; one stream: by shard id
    listed: dict[str, Shard] = {shard.shard_id: shard for shard in facts.shards}
    keys = set(leases)
    leased = keys | {lease.shard_id for lease in leases.values() if lease.stream is None}
    for shard_id, shard in sorted(listed.items()):
        if shard_id in leased or shard.ending_sequence_number is not None:
            continue  # a closed shard's lease is deleted by cleanup once its children run
        parents = [p for p in (shard.parent_shard_id, shard.adjacent_parent_shard_id) if p]
        if any(_leased(parent, shard_id, keys, leases) for parent in parents):
            continue  # its lease is created when its parent's shard ends
        found.append(
            Finding(
                WARNING,
                f"open shard {shard_id} has no lease",
                "shard sync creates it at its next run (shardSyncIntervalMillis); if it stays missing, no "
                "worker runs shard sync: check the workers",
                shard_id,
            )
        )
    for key, lease in sorted(leases.items()):
        name = key if lease.stream is not None else lease.shard_id
        if name not in listed:
            found.append(
                Finding(
                    WARNING,
                    f"lease {key} is for a shard the stream does not have (trimmed, or another stream's)",
                    "lease cleanup deletes it once its children are processed; if it stays, check the "
                    "configured stream, then delete the item",
                    key,
                )
            )
    return found


def _leased(parent: str, child_key: str, keys: set[str], leases: Mapping[str, Lease]) -> bool:
    if parent in keys:
        return True
    # multi-stream keys: the parent's key shares the child's stream prefix
    prefix = child_key[: -len(child_key.rsplit(":", 1)[-1])] if ":" in child_key else ""
    return bool(prefix) and f"{prefix}{parent}" in leases


def check_leader(facts: LeaderFacts) -> CheckResult:
    title = "leader lock"
    if facts.error is not None:
        return result("leader", title, skipped=f"could not read it: {facts.error}")
    if not facts.leader_mode and facts.first is None:
        return result("leader", title, skipped="the fleet runs KCL 2.x lease taking: no leader lock")
    first = parse_lock(facts.first)
    second = parse_lock(facts.second) if facts.second is not None else first
    problem = (second.problem if second is not None else None) or (
        first.problem if first is not None else None
    )
    if problem is not None:
        return result(
            "leader",
            title,
            findings=[
                Finding(
                    ERROR,
                    f"the Leader item in {facts.place} is not a lock as the lock client writes it: {problem}",
                    "delete the item; workers take such an item over once its leaseDuration passed unchanged",
                )
            ],
        )
    if second is None:
        if facts.leader_mode:
            return result(
                "leader",
                title,
                [f"in {facts.place}: none"],
                [
                    Finding(
                        WARNING,
                        "no worker holds the leader lock: no lease is assigned or moved",
                        "normal for a few seconds after start-up; if it stays, no KCL 3.x worker runs",
                    )
                ],
            )
        return result("leader", title, [f"in {facts.place}: none"])
    if second.released:
        return result("leader", title, [f"in {facts.place}: released by {second.owner}"])
    changed = first is not None and first.record_version != second.record_version
    lines = [
        f"in {facts.place}: held by {second.owner}, leaseDuration {second.duration_s:.0f}s",
        f"heartbeat: {'seen' if changed else 'not seen'} over {facts.window_s:.0f}s",
    ]
    alive = second.owner in facts.live_workers
    lines.append(
        f"owner: {'alive (current worker metrics or lease renewals)' if alive else 'no sign of life'}"
    )
    stale = not changed and (facts.window_s >= second.duration_s or (not alive and facts.window_s > 0))
    if stale:
        return result(
            "leader",
            title,
            lines,
            [
                Finding(
                    ERROR,
                    f"the leader lock held by {second.owner} is stale: not heartbeated over "
                    f"{facts.window_s:.0f}s and its owner shows no sign of life",
                    "workers take it over once they have seen it unchanged for its leaseDuration; if that "
                    "does not happen (KCL#1803), delete the Leader item and a new leader is elected: "
                    + _delete_command(facts.place or "?", facts.key_name, "Leader"),
                    second.owner,
                )
            ],
        )
    return result("leader", title, lines)


def _delete_command(table: str, key_name: str, key: str) -> str:
    return f'aws dynamodb delete-item --table-name {table} --key \'{{"{key_name}":{{"S":"{key}"}}}}\''


def check_worker_metrics(facts: WorkerMetricsFacts) -> CheckResult:
    title = f"worker metrics in {facts.table}"
    if facts.error is not None:
        return result("worker-metrics", title, skipped=f"could not read them: {facts.error}")
    if not facts.exists and not facts.rows:
        if facts.leader_mode:
            return result(
                "worker-metrics",
                title,
                findings=[
                    Finding(
                        WARNING,
                        f"{facts.table} does not exist: no KCL 3.x worker has published its metrics",
                        "a 3.x worker creates it at start; a leader assigns nothing to a worker without "
                        "current metrics",
                    )
                ],
            )
        return result("worker-metrics", title, skipped="no worker-metrics items (a KCL 2.x fleet)")
    limit = 2 * facts.reporter_period_s
    lines = [f"{len(facts.rows)} item(s); a worker is dead to the leader after {limit:.0f}s without a report"]
    found: list[Finding] = []
    for row in sorted(facts.rows, key=lambda r: r.worker_id):
        found += _metrics_row(row, facts, limit)
    if facts.leader_mode:
        reporting = {row.worker_id for row in facts.rows}
        for owner in sorted(facts.lease_owners - reporting):
            found.append(
                Finding(
                    WARNING,
                    f"worker {owner} holds leases but publishes no worker metrics",
                    "a KCL 3.x leader treats it as inactive: it gets no new leases and its leases move only "
                    "when they expire. Run it in 3.x mode, or stop it",
                    owner,
                )
            )
    return result("worker-metrics", title, lines, found)


def _metrics_row(row: MetricsRow, facts: WorkerMetricsFacts, limit: float) -> list[Finding]:
    if row.problem is not None:
        return [
            Finding(
                WARNING,
                f"unreadable item: {row.problem}",
                "delete it; its worker writes a new one",
                row.worker_id,
            )
        ]
    if row.last_update_s is None:
        return [Finding(WARNING, f"{row.worker_id}: no lut", "delete the item", row.worker_id)]
    age = facts.now_s - row.last_update_s
    if age <= limit:
        return []
    if age > facts.cleanup_after_s:
        fix = (
            f"no leader cleaned it up in {facts.cleanup_after_s / 3600:.0f} h "
            "(is a KCL 3.x leader running?); "
            f"delete it: {_delete_command(facts.table, facts.key_name, row.worker_id)}"
        )
    else:
        fix = (
            "if that worker is gone, the leader deletes the item after "
            f"{facts.cleanup_after_s / 3600:.0f} h; delete it sooner with "
            f"{_delete_command(facts.table, facts.key_name, row.worker_id)}"
        )
    return [
        Finding(WARNING, f"worker {row.worker_id} last reported {age:.0f}s ago (stale)", fix, row.worker_id)
    ]
