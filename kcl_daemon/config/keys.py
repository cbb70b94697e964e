"""The properties key table: every key we read, its type, unit, default and meaning - as data.

Java's names (``failoverTimeMillis``) appear only here; parsed values are seconds as floats. Keys
marked ``extension`` are kcl-daemon's own (the Java daemon ignores them, so one file can serve both).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final


class Kind(enum.Enum):
    STRING = "string"
    ARGV = "command line"  # split on runs of spaces, like Java's executableName.split(" +")
    INT = "integer"
    BYTES = "bytes"
    MILLIS = "milliseconds"  # parsed into float seconds
    SECONDS = "seconds"  # parsed into float seconds
    BOOL = "boolean"


@dataclass(frozen=True, slots=True)
class Key:
    name: str
    field: str
    kind: Kind
    default: object
    doc: str
    extension: bool = False
    minimum: float | None = None


KEYS: Final[tuple[Key, ...]] = (
    Key(
        "executableName",
        "executable",
        Kind.ARGV,
        None,
        "The record processor's command line, split on spaces (never run through a shell).",
    ),
    Key(
        "applicationName",
        "application_name",
        Kind.STRING,
        None,
        "Names the lease table (unless tableName is set) and the metrics namespace.",
    ),
    Key("streamName", "stream_name", Kind.STRING, None, "The Kinesis stream to read."),
    Key("processingLanguage", "processing_language", Kind.STRING, None, "Only logged."),
    Key(
        "timeoutInSeconds",
        "action_timeout_s",
        Kind.SECONDS,
        None,
        "How long the child may take to send each protocol message before it is stopped and restarted "
        "(Java: the whole daemon halts). Unset: wait forever.",
        minimum=0.001,
    ),
    Key(
        "callProcessRecordsEvenForEmptyRecordList",
        "call_process_records_even_for_empty_record_list",
        Kind.BOOL,
        False,
        "Send processRecords with an empty list when a read returns no records.",
    ),
    Key(
        "maxRecords",
        "max_records",
        Kind.INT,
        10000,
        "Records per GetRecords call (1-10000); also replay's default batch size.",
        minimum=1,
    ),
    Key(
        "initializeTimeoutInSeconds",
        "initialize_timeout_s",
        Kind.SECONDS,
        None,
        "Timeout for the answer to initialize; defaults to timeoutInSeconds.",
        extension=True,
        minimum=0.001,
    ),
    Key(
        "processRecordsTimeoutInSeconds",
        "process_records_timeout_s",
        Kind.SECONDS,
        None,
        "Timeout for each message while a batch is processed; defaults to timeoutInSeconds.",
        extension=True,
        minimum=0.001,
    ),
    Key(
        "shutdownTimeoutInSeconds",
        "shutdown_timeout_s",
        Kind.SECONDS,
        None,
        "Timeout for leaseLost, shardEnded and shutdownRequested; defaults to timeoutInSeconds.",
        extension=True,
        minimum=0.001,
    ),
    Key(
        "childWriteTimeoutMillis",
        "child_write_timeout_s",
        Kind.MILLIS,
        30000,
        "A child that does not read a message from its stdin within this time is restarted.",
        extension=True,
        minimum=1,
    ),
    Key(
        "childStopTimeoutMillis",
        "child_stop_timeout_s",
        Kind.MILLIS,
        5000,
        "Stopping a child: wait this long after closing its stdin, then after SIGTERM, before SIGKILL.",
        extension=True,
        minimum=0,
    ),
    Key(
        "childMaxLineBytes",
        "child_max_line_bytes",
        Kind.BYTES,
        1024 * 1024,
        "Longest line a child may write to stdout; a longer one is a child failure.",
        extension=True,
        minimum=1024,
    ),
    Key(
        "childRestartBackoffMillis",
        "child_restart_backoff_s",
        Kind.MILLIS,
        1000,
        "Delay before restarting a failed child; doubles with each consecutive failure.",
        extension=True,
        minimum=0,
    ),
    Key(
        "childRestartMaxBackoffMillis",
        "child_restart_max_backoff_s",
        Kind.MILLIS,
        60000,
        "Upper bound of the restart delay.",
        extension=True,
        minimum=0,
    ),
    Key(
        "childMaxConsecutiveFailures",
        "child_max_consecutive_failures",
        Kind.INT,
        5,
        "Failures without progress after which the shard is parked instead of restarted.",
        extension=True,
        minimum=1,
    ),
)

KEYS_BY_NAME: Final[dict[str, Key]] = {key.name: key for key in KEYS}

#: Java MultiLangDaemon keys accepted now and implemented by the lease and retrieval parts.
JAVA_KEYS_NOT_YET_USED: Final[frozenset[str]] = frozenset(
    {
        "streamArn",
        "workerId",
        "workerIdentifier",
        "tableName",
        "shutdownGraceMillis",
        "validateSequenceNumberBeforeCheckpointing",
        "regionName",
        "kinesisEndpoint",
        "dynamoDBEndpoint",
        "retrievalMode",
        "idleTimeBetweenReadsInMillis",
        "millisBehindLatestThresholdForReducedTps",
        "retryGetRecordsInSeconds",
        "maxGetRecordsThreadPool",
        "initialPositionInStream",
        "initialPositionInStreamExtended",
        "failoverTimeMillis",
        "shardSyncIntervalMillis",
        "cleanupLeasesUponShardCompletion",
        "ignoreUnexpectedChildShards",
        "maxLeasesForWorker",
        "maxLeasesToStealAtOneTime",
        "initialLeaseTableReadCapacity",
        "initialLeaseTableWriteCapacity",
        "maxLeaseRenewalThreads",
        "listShardsBackoffTimeInMillis",
        "maxListShardsRetryAttempts",
        "enablePriorityLeaseAssignment",
        "leaseTableDeletionProtectionEnabled",
        "leaseTablePitrEnabled",
        "leaseTableScanTotalSegments",
        "leaseAssignmentIntervalMillis",
        "parentShardPollIntervalMillis",
        "skipShardSyncAtWorkerInitializationIfLeasesExist",
        "schedulerInitializationBackoffTimeMillis",
        "shardPrioritization",
        "taskBackoffTimeMillis",
        "logWarningForTaskAfterMillis",
        "metricsLevel",
        "metricsEnabledDimensions",
        "metricsBufferTimeMillis",
        "metricsMaxQueueSize",
        "clientVersionConfig",
        "migrateAllEntitiesToLeaseTable",
        "tableMigrationCompleteBakeTimeSeconds",
        "gracefulLeaseHandoffTimeoutMillis",
        "isGracefulLeaseHandoffEnabled",
        "inMemoryWorkerMetricsCaptureFrequencyMillis",
        "workerMetricsReporterFreqInMillis",
        "noOfPersistedMetricsPerWorkerMetrics",
        "disableWorkerMetrics",
        "maxThroughputPerHostKBps",
        "dampeningPercentage",
        "reBalanceThresholdPercentage",
        "allowThroughputOvershoot",
        "varianceBalancingFrequency",
        "workerMetricsEMAAlpha",
        "staleWorkerMetricsEntryCleanupDuration",
        "workerMetricsTableName",
        "workerMetricsBillingMode",
        "workerMetricsReadCapacity",
        "workerMetricsWriteCapacity",
        "workerMetricsPointInTimeRecoveryEnabled",
        "workerMetricsDeletionProtectionEnabled",
        "workerMetricsTags",
        "coordinatorStateTableName",
        "coordinatorStateBillingMode",
        "coordinatorStateReadCapacity",
        "coordinatorStateWriteCapacity",
        "coordinatorStatePointInTimeRecoveryEnabled",
        "coordinatorStateDeletionProtectionEnabled",
        "coordinatorStateTags",
        "maxActiveThreads",
        "timestampAtInitialPositionInStream",
        "billingMode",
    }
)


def is_known_key(name: str) -> bool:
    lowered = name.lower()
    return (
        name in KEYS_BY_NAME
        or name in JAVA_KEYS_NOT_YET_USED
        or lowered.startswith("awscredentialsprovider")
        or "." in name  # nested bean paths (fanoutConfig.*, kinesisClient.*): handled where used
    )


def markdown_table() -> str:
    """The README's key table, generated from :data:`KEYS` (a test keeps the two in sync)."""
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key in KEYS:
        name = f"`{key.name}`" + (" *(kcl-daemon)*" if key.extension else "")
        if key.default is None:
            default = "unset"
        elif key.kind is Kind.BOOL:
            default = str(key.default).lower()
        else:
            default = str(key.default)
        lines.append(f"| {name} | {key.kind.value} | {default} | {key.doc} |")
    return "\n".join(lines)
