"""The manual documents what the code does: the key tables of docs/configuration.md are generated from the
key table, and the README keeps its two set-up commands."""

from __future__ import annotations

from kcl_daemon.config.keys import IGNORED_KEYS, KEYS, markdown_ignored, markdown_table
from tests.support.paths import REPO

ROOT = REPO
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")


def test_key_table_is_generated_from_the_key_table() -> None:
    start = CONFIGURATION.index("<!-- keys:start -->\n") + len("<!-- keys:start -->\n")
    end = CONFIGURATION.index("\n<!-- keys:end -->")
    assert CONFIGURATION[start:end] == markdown_table(), (
        "regenerate: python -c 'from kcl_daemon.config.keys import *; print(markdown_table())'"
    )


def test_ignored_keys_are_generated_from_the_key_table() -> None:
    start = CONFIGURATION.index("<!-- ignored-keys:start -->\n") + len("<!-- ignored-keys:start -->\n")
    end = CONFIGURATION.index("\n<!-- ignored-keys:end -->")
    assert CONFIGURATION[start:end] == markdown_ignored(), (
        "regenerate: python -c 'from kcl_daemon.config.keys import *; print(markdown_ignored())'"
    )


def test_every_java_key_of_the_spec_is_either_used_or_ignored() -> None:
    """Contract §2.2: every multilang key appears in one of the two tables, and never in both."""
    used = {name for key in KEYS for name in key.names}
    ignored = {key.name for key in IGNORED_KEYS}
    assert not used & ignored
    spec_keys = {
        "executableName", "processingLanguage", "maxActiveThreads", "applicationName", "streamName",
        "streamArn", "workerId", "workerIdentifier", "tableName", "shutdownGraceMillis",
        "timeoutInSeconds", "validateSequenceNumberBeforeCheckpointing", "AwsCredentialsProvider",
        "AwsCredentialsProviderDynamoDB", "AwsCredentialsProviderCloudWatch", "regionName",
        "kinesisEndpoint", "dynamoDBEndpoint", "retrievalMode", "maxRecords",
        "idleTimeBetweenReadsInMillis", "millisBehindLatestThresholdForReducedTps",
        "retryGetRecordsInSeconds", "maxGetRecordsThreadPool", "initialPositionInStream",
        "initialPositionInStreamExtended", "callProcessRecordsEvenForEmptyRecordList",
        "failoverTimeMillis", "shardSyncIntervalMillis", "cleanupLeasesUponShardCompletion",
        "ignoreUnexpectedChildShards", "maxLeasesForWorker", "maxLeasesToStealAtOneTime",
        "initialLeaseTableReadCapacity", "initialLeaseTableWriteCapacity", "maxLeaseRenewalThreads",
        "listShardsBackoffTimeInMillis", "maxListShardsRetryAttempts", "enablePriorityLeaseAssignment",
        "leaseTableDeletionProtectionEnabled", "leaseTablePitrEnabled", "leaseTableScanTotalSegments",
        "leaseAssignmentIntervalMillis", "parentShardPollIntervalMillis",
        "skipShardSyncAtWorkerInitializationIfLeasesExist", "schedulerInitializationBackoffTimeMillis",
        "shardPrioritization", "taskBackoffTimeMillis", "logWarningForTaskAfterMillis", "metricsLevel",
        "metricsEnabledDimensions", "metricsBufferTimeMillis", "metricsMaxQueueSize",
        "clientVersionConfig", "migrateAllEntitiesToLeaseTable", "tableMigrationCompleteBakeTimeSeconds",
        "gracefulLeaseHandoffTimeoutMillis", "isGracefulLeaseHandoffEnabled",
        "inMemoryWorkerMetricsCaptureFrequencyMillis", "workerMetricsReporterFreqInMillis",
        "noOfPersistedMetricsPerWorkerMetrics", "disableWorkerMetrics", "maxThroughputPerHostKBps",
        "dampeningPercentage", "reBalanceThresholdPercentage", "allowThroughputOvershoot",
        "varianceBalancingFrequency", "workerMetricsEMAAlpha", "staleWorkerMetricsEntryCleanupDuration",
        "workerMetricsTableName", "workerMetricsBillingMode", "workerMetricsReadCapacity",
        "workerMetricsWriteCapacity", "workerMetricsPointInTimeRecoveryEnabled",
        "workerMetricsDeletionProtectionEnabled", "workerMetricsTags", "coordinatorStateTableName",
        "coordinatorStateBillingMode", "coordinatorStateReadCapacity", "coordinatorStateWriteCapacity",
        "coordinatorStatePointInTimeRecoveryEnabled", "coordinatorStateDeletionProtectionEnabled",
        "coordinatorStateTags",
    }  # fmt: skip
    assert spec_keys - used - ignored == set()


def test_readme_has_exactly_two_set_up_commands() -> None:
    block = README.split("## Set-up commands", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in block.strip().splitlines()] == ["make run", "make test"]
