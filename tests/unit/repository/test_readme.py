"""The manual documents what the code does: the key tables of docs/configuration.md are generated from the
key table, the README keeps its two set-up commands, and how long they take is stated in one place each."""

from __future__ import annotations

import re

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


#: A duration as the docs write one: "20 min", "about 15 minutes", "47 s", "1,145 seconds".
DURATION = re.compile(r"\b\d[\d,.]*\s*(?:min|minutes?|s|seconds?|h|hours?)\b")


def timed_statements(target: str) -> list[str]:
    """Each sentence (or line of a code block) of the README, the manual, the Makefile and the scripts that
    gives ``make <target>`` a duration."""
    mention = re.compile(rf"make {re.escape(target)}(?![\w-])")
    files = [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "docs").rglob("*.md"))]
    files += [*sorted((ROOT / "scripts").glob("*.sh")), *sorted((ROOT / ".ci").iterdir())]
    found = []
    for path in files:
        for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
            lines = block.splitlines()
            if any(line.startswith(("```", "#", "    ", "\t")) for line in lines) or "|" in block:
                pieces = lines  # code, comments and tables: one statement a line
            else:
                pieces = re.split(r"(?<=[.:;])\s+", " ".join(lines))
            found += [
                f"{path.relative_to(ROOT)}: {p.strip()}"
                for p in pieces
                if mention.search(p) and DURATION.search(p)
            ]
    return found


def test_how_long_make_test_takes_is_stated_once_in_the_readme() -> None:
    """README.md and docs/development.md cannot disagree: the figure is in the README's set-up commands
    (the lead updates it when the suite's time changes) and docs/development.md points there."""
    statements = timed_statements("test")
    assert len(statements) == 1 and statements[0].startswith("README.md: make test    #"), (
        "state how long make test takes once, in the README's set-up commands; found: "
        + " | ".join(statements)
    )
    assert "stated once, in the README's set-up commands" in (ROOT / "docs" / "development.md").read_text(
        "utf-8"
    )


def test_how_long_a_first_make_run_takes_is_stated_once() -> None:
    statements = timed_statements("run")
    assert len(statements) == 1 and statements[0].startswith("docs/development.md: "), (
        "state how long a first make run takes once, in docs/development.md; found: " + " | ".join(statements)
    )


def test_durations_are_found_in_sentences_and_code() -> None:
    assert DURATION.search("about 20 min on 2 CPUs") and DURATION.search("ran 1,145 s")
    assert not DURATION.search("3 workers") and not DURATION.search("2 CPUs")
