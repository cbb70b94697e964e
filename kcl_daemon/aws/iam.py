"""The IAM actions kcl-daemon calls, on which resource, and when a configuration needs each one.

One table (:data:`ACTIONS`) serves three readers: ``kcl-daemon doctor`` (which actions to try for a
configuration), the policies under ``deploy/iam/`` (a test checks each file holds exactly the actions
its case needs) and the IAM test that walks this package's source for client calls (an action the
code calls that is in no row here, nor in :data:`NOT_IN_POLICIES`, fails it).

Resources are placeholders the policies spell out: ``lease-table`` (``tableName``, else
``applicationName``), ``lease-table-index`` (its ``LeaseOwnerToLeaseKeyIndex``),
``coordinator-table`` (``<app>-CoordinatorState``), ``worker-metrics-table``
(``<app>-WorkerMetricStats``), ``stream``, ``stream-consumer``, ``*`` (CloudWatch takes no resource) and
the ``deadLetterDestination`` of ``poisonRecordPolicy = DEAD_LETTER`` (docs/failures.md): a queue, a
stream or an S3 prefix, one statement each in the optional ``kcl-daemon-dead-letters`` policy.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from kcl_daemon.core.leader.table_names import legacy_table_names


class Need(enum.StrEnum):
    """A condition under which an action is called; a row is needed when all of its conditions hold."""

    ALWAYS = "always"  #: every worker, any lease mode
    MIGRATION_STATE = "migration-state"  #: a worker that writes Migration3.0 (2.x-compatible upgrade, 3.x)
    LEADER = "leader"  #: KCL 3.x leader-based assignment (and the 2.x-compatible upgrade's readiness)
    LEGACY_TABLES = "legacy-tables"  #: the KCL 3.0-3.4 layout: coordinator-state + worker-metrics tables
    FANOUT = "fanout"  #: retrievalMode FANOUT (enhanced fan-out)
    CLOUDWATCH = "cloudwatch"  #: metricsLevel other than NONE
    OPERATOR = "operator"  #: the operator commands (doctor, checkpoint, migrate, deregister-consumer)
    DEAD_LETTER = "dead-letter"  #: poisonRecordPolicy DEAD_LETTER: writes to deadLetterDestination
    PER_WORKER = "per-worker"  #: leaseRenewal PER_WORKER: the heartbeats, in the worker-metrics table


class Resource(enum.StrEnum):
    LEASE_TABLE = "lease-table"
    LEASE_TABLE_INDEX = "lease-table-index"
    COORDINATOR_TABLE = "coordinator-table"
    WORKER_METRICS_TABLE = "worker-metrics-table"
    STREAM = "stream"
    STREAM_CONSUMER = "stream-consumer"
    DEAD_LETTER_QUEUE = "dead-letter-queue"
    DEAD_LETTER_STREAM = "dead-letter-stream"
    DEAD_LETTER_PREFIX = "dead-letter-prefix"
    ANY = "*"


@dataclass(frozen=True, slots=True)
class IamAction:
    action: str
    resource: Resource
    needs: frozenset[Need]
    why: str


def _a(action: str, resource: Resource, needs: Iterable[Need], why: str) -> IamAction:
    return IamAction(action, resource, frozenset(needs), why)


A, M, L, T = Need.ALWAYS, Need.MIGRATION_STATE, Need.LEADER, Need.LEGACY_TABLES
LEASES, INDEX = Resource.LEASE_TABLE, Resource.LEASE_TABLE_INDEX
COORD, METRICS = Resource.COORDINATOR_TABLE, Resource.WORKER_METRICS_TABLE
DL = Need.DEAD_LETTER
PW = Need.PER_WORKER

ACTIONS: Final[tuple[IamAction, ...]] = (
    # the lease table
    _a("dynamodb:DescribeTable", LEASES, [A], "wait for the lease table to be ACTIVE; its GSI"),
    _a("dynamodb:CreateTable", LEASES, [A], "create the lease table when it is missing"),
    _a("dynamodb:Scan", LEASES, [A], "list leases (taker, shard sync, leader, cleanup)"),
    _a("dynamodb:GetItem", LEASES, [A], "read one lease; Migration3.0 in a single-table layout"),
    _a("dynamodb:BatchGetItem", LEASES, [L], "lease discovery reads the leases assigned to it, 100 a call"),
    _a("dynamodb:PutItem", LEASES, [A], "create leases; single-table coordinator items"),
    _a("dynamodb:UpdateItem", LEASES, [A], "renew, take, checkpoint, release, assign"),
    _a("dynamodb:DeleteItem", LEASES, [A], "delete finished leases; single-table leader lock release"),
    _a("dynamodb:Query", INDEX, [L], "lease discovery through LeaseOwnerToLeaseKeyIndex"),
    # where coordinator state lives: the side table is looked for in every mode
    _a("dynamodb:DescribeTable", COORD, [A], "find out whether the coordinator-state table exists"),
    _a("dynamodb:GetItem", COORD, [A], "read Migration3.0 (looked for there in every mode), the lock"),
    _a("dynamodb:CreateTable", COORD, [M, T], "create <app>-CoordinatorState (KCL 3.0-3.4 layout)"),
    _a("dynamodb:PutItem", COORD, [M, T], "write Migration3.0; take the Leader lock"),
    _a("dynamodb:UpdateItem", COORD, [L, T], "heartbeat the Leader lock"),
    _a("dynamodb:DeleteItem", COORD, [L, T], "release the Leader lock; the table migration moves items out"),
    _a("dynamodb:ConditionCheckItem", COORD, [L, T], "the table migration's moves are fenced on the lock"),
    # worker metrics: in the side table in the KCL 3.0-3.4 layout, in the lease table (its rows above)
    # in the single-table layout (contract §9.2.6)
    _a("dynamodb:DescribeTable", METRICS, [M, T], "wait for <app>-WorkerMetricStats to be ACTIVE"),
    _a("dynamodb:CreateTable", METRICS, [M, T], "create <app>-WorkerMetricStats"),
    _a("dynamodb:UpdateItem", METRICS, [M, T], "publish this worker's metrics"),
    _a("dynamodb:Scan", METRICS, [M, T], "the leader reads every worker's metrics"),
    _a("dynamodb:DeleteItem", METRICS, [M, T], "withdraw on a graceful stop; the leader deletes stale ones"),
    _a("dynamodb:Scan", METRICS, [M], "the layout check: KCL 3.0-3.4 workers' metrics beside a single table"),
    _a("dynamodb:DescribeTable", METRICS, [PW], "per-worker renewal: wait for <app>-WorkerMetricStats"),
    _a("dynamodb:CreateTable", METRICS, [PW], "per-worker renewal: the first heartbeat creates the table"),
    _a("dynamodb:UpdateItem", METRICS, [PW], "per-worker renewal: the heartbeat"),
    _a("dynamodb:Scan", METRICS, [PW], "per-worker renewal: every taker pass reads the heartbeats"),
    _a("dynamodb:DeleteItem", METRICS, [PW], "per-worker renewal: the heartbeat withdrawn"),
    # the stream
    _a("kinesis:ListShards", Resource.STREAM, [A], "shard sync; where a shard ends"),
    _a("kinesis:GetShardIterator", Resource.STREAM, [A], "start reading a shard"),
    _a("kinesis:GetRecords", Resource.STREAM, [A], "read a shard (polling)"),
    _a("kinesis:DescribeStreamSummary", Resource.STREAM, [A], "stream identity (streamNames), ARN (fan-out)"),
    _a("kinesis:DescribeStreamConsumer", Resource.STREAM_CONSUMER, [Need.FANOUT], "find the consumer"),
    _a("kinesis:RegisterStreamConsumer", Resource.STREAM, [Need.FANOUT], "register the consumer"),
    _a("kinesis:SubscribeToShard", Resource.STREAM_CONSUMER, [Need.FANOUT], "read a shard (fan-out)"),
    _a("kinesis:DeregisterStreamConsumer", Resource.STREAM, [Need.OPERATOR], "deregister-consumer only"),
    # what doctor reads beyond a 2.x worker's own actions
    _a("dynamodb:DescribeTable", METRICS, [Need.OPERATOR], "doctor: does the worker-metrics table exist"),
    _a("dynamodb:Scan", METRICS, [Need.OPERATOR], "doctor: stale worker-metrics items"),
    # kcl-daemon migrate (contract §9)
    _a("dynamodb:UpdateTable", LEASES, [Need.OPERATOR], "migrate rollback: delete the lease-owner GSI"),
    _a("dynamodb:DeleteTable", COORD, [Need.OPERATOR], "migrate remove-legacy-tables"),
    _a("dynamodb:DeleteTable", METRICS, [Need.OPERATOR], "migrate remove-legacy-tables"),
    # metrics
    _a("cloudwatch:PutMetricData", Resource.ANY, [Need.CLOUDWATCH], "publish metrics"),
    # deadLetterDestination (one of the three): kcl_daemon.aws.dead_letter_puts
    _a("sqs:GetQueueUrl", Resource.DEAD_LETTER_QUEUE, [DL], "sqs://NAME: the queue's URL, once"),
    _a("sqs:SendMessage", Resource.DEAD_LETTER_QUEUE, [DL], "sqs://: one message per dead letter"),
    _a("kinesis:PutRecord", Resource.DEAD_LETTER_STREAM, [DL], "kinesis://: one record per dead letter"),
    _a("s3:PutObject", Resource.DEAD_LETTER_PREFIX, [DL], "s3://: one object per dead letter"),
)

#: Calls of the AWS layer that belong in no worker policy, and why.
NOT_IN_POLICIES: Final[dict[str, str]] = {
    "kinesis:CreateStream": "provision.py, for `run --local` against the embedded backend only",
    "kinesis:PutRecords": "provision.py (the sample producer of `run --local`) and the Spark sink, no worker",
    "dynamodb:UpdateTimeToLive": "batch_ends.py: the Spark source's metadata table expires old items",
    "sts:AssumeRole": "the ASSUME_ROLE credentials provider: granted to the base identity on the role",
    "sts:GetCallerIdentity": "doctor's identity check; every identity may call it, no policy grants it",
    "sqs:ReceiveMessage": "dead_letter_puts.py: `kcl-daemon dead-letters` reads a queue, as the operator "
    "(docs/failures.md lists what it needs on each destination)",
    "s3:GetObject": "dead_letter_puts.py: `kcl-daemon dead-letters` reads an S3 prefix, as the operator",
}


#: Calls that are no IAM action of their own: each part of them is authorised as its own action.
AUTHORISED_BY_PARTS: Final[dict[str, tuple[str, ...]]] = {
    "dynamodb:TransactWriteItems": ("dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"),
}


@dataclass(frozen=True, slots=True)
class Case:
    """One deployment case: the lease mode and table layout a policy is written for."""

    name: str
    needs: frozenset[Need]
    description: str


CASES: Final[tuple[Case, ...]] = (
    Case(
        "kcl-daemon-2x",
        frozenset({A, Need.CLOUDWATCH}),
        "KCL 2.x lease taking: clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1 "
        "(the worker reads, never writes, coordinator state)",
    ),
    Case(
        "kcl-daemon-3x",
        frozenset({A, M, L, T, Need.CLOUDWATCH}),
        "KCL 3.x leader-based assignment (CLIENT_VERSION_CONFIG_3X, and the 2.x-compatible upgrade), "
        "KCL 3.0-3.4 layout: <app>-CoordinatorState and <app>-WorkerMetricStats beside the lease table",
    ),
    Case(
        "kcl-daemon-3x-single-table",
        frozenset({A, M, L, Need.CLOUDWATCH}),
        "KCL 3.x on a KCL 3.5 single-table lease table: Leader, Migration3.0 and the worker metrics in the "
        "lease table (contract §9.2.6)",
    ),
    Case("kcl-daemon-fanout", frozenset({Need.FANOUT}), "add to any of the above for enhanced fan-out"),
    Case(
        "kcl-daemon-per-worker",
        frozenset({PW}),
        "add for leaseRenewal = PER_WORKER: the heartbeats in <app>-WorkerMetricStats",
    ),
    Case(
        "kcl-daemon-operator",
        frozenset({Need.OPERATOR}),
        "add for the operator commands: deregister-consumer, migrate, and what doctor reads beyond a "
        "2.x worker's actions (checkpoint needs the worker's own)",
    ),
    Case(
        "kcl-daemon-dead-letters",
        frozenset({DL}),
        "add for poisonRecordPolicy = DEAD_LETTER: keep the statement of your deadLetterDestination's "
        "kind (a queue, a stream or an S3 prefix) and delete the other two",
    ),
)


def actions_for(needs: Iterable[Need]) -> tuple[IamAction, ...]:
    """The rows a configuration with these needs calls: those whose every need is met."""
    have = frozenset(needs) | {Need.ALWAYS}
    return tuple(row for row in ACTIONS if row.needs <= have)


def action_names(rows: Iterable[IamAction]) -> frozenset[str]:
    return frozenset(row.action for row in rows)


#: The side tables' names as the policies spell them.
_SIDE_TABLES: Final = legacy_table_names("APPLICATION_NAME", "LEASE_TABLE")
#: How the policies under deploy/iam/ spell each resource (the placeholders are replaced on deployment).
RESOURCE_ARNS: Final[dict[Resource, str]] = {
    Resource.LEASE_TABLE: "arn:aws:dynamodb:REGION:ACCOUNT_ID:table/LEASE_TABLE",
    Resource.LEASE_TABLE_INDEX: (
        "arn:aws:dynamodb:REGION:ACCOUNT_ID:table/LEASE_TABLE/index/LeaseOwnerToLeaseKeyIndex"
    ),
    Resource.COORDINATOR_TABLE: f"arn:aws:dynamodb:REGION:ACCOUNT_ID:table/{_SIDE_TABLES.coordinator_state}",
    Resource.WORKER_METRICS_TABLE: f"arn:aws:dynamodb:REGION:ACCOUNT_ID:table/{_SIDE_TABLES.worker_metrics}",
    Resource.STREAM: "arn:aws:kinesis:REGION:ACCOUNT_ID:stream/STREAM_NAME",
    Resource.STREAM_CONSUMER: "arn:aws:kinesis:REGION:ACCOUNT_ID:stream/STREAM_NAME/consumer/CONSUMER_NAME:*",
    Resource.DEAD_LETTER_QUEUE: "arn:aws:sqs:REGION:ACCOUNT_ID:DEAD_LETTER_QUEUE",
    Resource.DEAD_LETTER_STREAM: "arn:aws:kinesis:REGION:ACCOUNT_ID:stream/DEAD_LETTER_STREAM",
    Resource.DEAD_LETTER_PREFIX: "arn:aws:s3:::DEAD_LETTER_BUCKET/DEAD_LETTER_PREFIX/*",
    Resource.ANY: "*",
}
_SIDS: Final[dict[Resource, str]] = {
    Resource.LEASE_TABLE: "LeaseTable",
    Resource.LEASE_TABLE_INDEX: "LeaseOwnerIndex",
    Resource.COORDINATOR_TABLE: "CoordinatorStateTable",
    Resource.WORKER_METRICS_TABLE: "WorkerMetricsTable",
    Resource.STREAM: "Stream",
    Resource.STREAM_CONSUMER: "StreamConsumer",
    Resource.DEAD_LETTER_QUEUE: "DeadLetterQueue",
    Resource.DEAD_LETTER_STREAM: "DeadLetterStream",
    Resource.DEAD_LETTER_PREFIX: "DeadLetterPrefix",
    Resource.ANY: "CloudWatchMetrics",
}


def policy_document(case: Case) -> dict[str, object]:
    """The IAM policy of one deployment case: one statement per resource, actions sorted.

    A case's own rows only: fan-out and operator cases add to a worker case instead of repeating it."""
    base = frozenset({Need.ALWAYS}) if Need.ALWAYS in case.needs else frozenset()
    rows = [row for row in actions_for(case.needs) if base or row.needs & case.needs - {Need.ALWAYS}]
    statements: list[dict[str, object]] = []
    for resource in Resource:
        actions = sorted({row.action for row in rows if row.resource is resource})
        if not actions:
            continue
        statement: dict[str, object] = {
            "Sid": _SIDS[resource],
            "Effect": "Allow",
            "Action": actions,
            "Resource": RESOURCE_ARNS[resource],
        }
        if resource is Resource.ANY:
            statement["Condition"] = {"StringEquals": {"cloudwatch:namespace": "APPLICATION_NAME"}}
        statements.append(statement)
    return {"Version": "2012-10-17", "Statement": statements}


def write_policies(directory: str) -> None:
    """Write every case's policy as ``<directory>/<case>.json`` (what deploy/iam/ holds)."""
    import json
    from pathlib import Path

    for case in CASES:
        text = json.dumps(policy_document(case), indent=2) + "\n"
        Path(directory, f"{case.name}.json").write_text(text, encoding="utf-8")
