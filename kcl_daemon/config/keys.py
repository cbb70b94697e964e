"""The properties key table: every key we read, its type, unit, default and meaning - as data.

Java's names (``failoverTimeMillis``) appear only here; parsed values are seconds as floats. Keys
marked ``extension`` are kcl-daemon's own (the Java daemon ignores them, so one file can serve both).
:data:`IGNORED_KEYS` lists the Java keys that are accepted but have no effect, each with the reason;
:func:`markdown_table` and :func:`markdown_ignored` generate the README's tables from both.
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
    CHOICE = "one of"  # case-insensitive, like Java's enum keys; the value is the canonical spelling
    NAMES = "comma list"  # a comma-separated list of CHOICE values
    POSITION = "initial position"  # a kcl_daemon.core.sequence.Sentinel
    EPOCH_SECONDS = "epoch seconds"  # whole seconds since 1970-01-01 UTC -> aware datetime
    URL = "URL"  # must have a scheme and a host
    STREAM_ARN = "stream ARN"
    CREDENTIALS = "credentials provider"  # kcl_daemon.config.providers syntax; kept as the raw string


@dataclass(frozen=True, slots=True)
class Key:
    name: str
    field: str
    kind: Kind
    default: object
    doc: str
    extension: bool = False
    minimum: float | None = None
    maximum: float | None = None
    #: values below the floor are raised to it with a warning (in the key's unit)
    floor: float | None = None
    #: other names of the same key (Java aliases, legacy spellings)
    aliases: tuple[str, ...] = ()
    #: CHOICE / NAMES / POSITION: the accepted values, canonical spelling
    choices: tuple[str, ...] = ()
    #: what an unset key means, for the README when ``default`` is None
    unset: str = "unset"

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


_POLLING = "Setting it selects polling when retrievalMode is DEFAULT."

KEYS: Final[tuple[Key, ...]] = (
    # --- daemon and identity
    Key(
        "executableName",
        "executable",
        Kind.ARGV,
        None,
        "The record processor's command line, split on spaces (never run through a shell). "
        "Required by `run` and `replay`.",
        unset="required",
    ),
    Key(
        "applicationName",
        "application_name",
        Kind.STRING,
        None,
        "Names the lease table (unless tableName is set) and the metrics namespace. Required by `run`.",
        unset="required",
    ),
    Key(
        "streamName",
        "stream_name",
        Kind.STRING,
        None,
        "The Kinesis stream to read; `run` needs this or streamArn.",
    ),
    Key(
        "streamArn",
        "stream_arn",
        Kind.STREAM_ARN,
        None,
        "`arn:aws[-partition]:kinesis:REGION:ACCOUNT:stream/NAME`; takes precedence over streamName. "
        "As in Java only the stream name is used (the account and region are not).",
    ),
    Key(
        "streamNames",
        "stream_names",
        Kind.STRING,
        None,
        "Several streams in one application: `NAME` or `NAME=POSITION` entries, comma-separated "
        "(POSITION: LATEST, TRIM_HORIZON or AT_TIMESTAMP@epoch-seconds; default initialPositionInStream). "
        "Leases are keyed `account:stream:creationEpoch:shardId` as in Java's multi-stream mode; "
        "replaces streamName/streamArn.",
        extension=True,
    ),
    Key(
        "formerStreamsLeasesDeletionWaitMillis",
        "former_streams_leases_deletion_wait_s",
        Kind.MILLIS,
        3600000,
        "With streamNames: how long a stream must stay deleted, re-created or unlisted before its "
        "leases are deleted (Java's deferred FormerStreamsLeasesDeletionStrategy).",
        extension=True,
        minimum=0,
    ),
    Key(
        "workerId",
        "worker_id",
        Kind.STRING,
        None,
        "This worker's lease owner id, taken literally.",
        aliases=("workerIdentifier",),
        unset="a random UUID per start",
    ),
    Key(
        "tableName",
        "table_name",
        Kind.STRING,
        None,
        "The lease table.",
        unset="applicationName",
    ),
    Key("processingLanguage", "processing_language", Kind.STRING, None, "Only logged."),
    Key(
        "timeoutInSeconds",
        "action_timeout_s",
        Kind.SECONDS,
        None,
        "How long the child may take to send each protocol message before it is stopped and restarted "
        "(Java: the whole daemon halts).",
        minimum=0.001,
        unset="wait forever",
    ),
    Key(
        "shutdownGraceMillis",
        "shutdown_grace_s",
        Kind.MILLIS,
        20000,
        "On SIGTERM/SIGINT: how long children may take to finish (shutdownRequested, checkpoint) "
        "before they are stopped and the leases released. 0 skips the graceful part (Java's default).",
        minimum=0,
    ),
    Key(
        "validateSequenceNumberBeforeCheckpointing",
        "validate_sequence_number_before_checkpointing",
        Kind.BOOL,
        True,
        "Accepted and ignored, as by the Java 2.x/3.x daemon (checkpoints are checked against the "
        "records delivered instead).",
    ),
    # --- AWS clients and credentials
    Key(
        "AwsCredentialsProvider",
        "aws_credentials_provider",
        Kind.CREDENTIALS,
        None,
        "Credentials for Kinesis, and for DynamoDB and CloudWatch unless set for them; "
        "e.g. `DefaultCredentialsProvider`, `ProfileCredentialsProvider|name`, "
        "`StsAssumeRoleCredentialsProvider|roleArn|sessionName`. Key name case-insensitive.",
        aliases=("AWSCredentialsProvider",),
        unset="boto3's default chain",
    ),
    Key(
        "AwsCredentialsProviderDynamoDB",
        "aws_credentials_provider_dynamodb",
        Kind.CREDENTIALS,
        None,
        "Credentials for the lease table.",
        aliases=("AWSCredentialsProviderDynamoDB",),
        unset="AwsCredentialsProvider",
    ),
    Key(
        "AwsCredentialsProviderCloudWatch",
        "aws_credentials_provider_cloudwatch",
        Kind.CREDENTIALS,
        None,
        "Credentials for CloudWatch metrics.",
        aliases=("AWSCredentialsProviderCloudWatch",),
        unset="AwsCredentialsProvider",
    ),
    Key(
        "regionName",
        "region_name",
        Kind.STRING,
        None,
        "Region of every AWS client.",
        unset="boto3's (AWS_DEFAULT_REGION, ~/.aws/config)",
    ),
    Key(
        "kinesisEndpoint",
        "kinesis_endpoint",
        Kind.URL,
        None,
        "Kinesis endpoint, with scheme (`http://localhost:4567`).",
        aliases=("kinesisClient.endpointOverride",),
        unset="boto3's (AWS_ENDPOINT_URL_KINESIS, AWS_ENDPOINT_URL)",
    ),
    Key(
        "dynamoDBEndpoint",
        "dynamodb_endpoint",
        Kind.URL,
        None,
        "DynamoDB endpoint, with scheme.",
        aliases=("dynamoDbClient.endpointOverride",),
        unset="boto3's (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL)",
    ),
    # --- retrieval
    Key(
        "retrievalMode",
        "retrieval_mode",
        Kind.CHOICE,
        "DEFAULT",
        "DEFAULT: polling if any polling key is set, otherwise enhanced fan-out (Java's rule).",
        choices=("DEFAULT", "POLLING", "FANOUT"),
    ),
    Key(
        "fanoutConfig.consumerName",
        "fanout_consumer_name",
        Kind.STRING,
        None,
        "Enhanced fan-out: the stream consumer to register or reuse (Java's FanOutConfig).",
        unset="applicationName",
    ),
    Key(
        "fanoutConfig.consumerArn",
        "fanout_consumer_arn",
        Kind.STRING,
        None,
        "Enhanced fan-out: use this registered consumer (never registers one); overrides consumerName.",
    ),
    Key(
        "maxRecords",
        "max_records",
        Kind.INT,
        10000,
        "Records per GetRecords call; also replay's default batch size. " + _POLLING,
        minimum=1,
        maximum=10000,
    ),
    Key(
        "idleTimeBetweenReadsInMillis",
        "idle_time_between_reads_s",
        Kind.MILLIS,
        1500,
        "Minimum time between GetRecords calls on a shard; values below 200 are raised to 200. " + _POLLING,
        minimum=0,
        floor=200,
    ),
    Key(
        "millisBehindLatestThresholdForReducedTps",
        "millis_behind_latest_threshold_for_reduced_tps_s",
        Kind.MILLIS,
        0,
        "When a read is less than this far behind the tip, wait at least this long before the next "
        "read; 0 disables. " + _POLLING,
        minimum=0,
    ),
    Key(
        "initialPositionInStream",
        "initial_position",
        Kind.POSITION,
        "LATEST",
        "Where a shard without a checkpoint starts: LATEST or TRIM_HORIZON.",
        choices=("LATEST", "TRIM_HORIZON"),
    ),
    Key(
        "initialPositionInStreamExtended",
        "initial_position_timestamp",
        Kind.EPOCH_SECONDS,
        None,
        "Start shards without a checkpoint at this instant (AT_TIMESTAMP); overrides "
        "initialPositionInStream.",
        minimum=0,
    ),
    Key(
        "callProcessRecordsEvenForEmptyRecordList",
        "call_process_records_even_for_empty_record_list",
        Kind.BOOL,
        False,
        "Send processRecords with an empty list when a read returns no records.",
    ),
    # --- lease management
    Key(
        "failoverTimeMillis",
        "failover_s",
        Kind.MILLIS,
        10000,
        "Lease duration: a lease whose counter has not moved for this long may be taken (at least 100: "
        "the renewal period is a third of it less 25 ms).",
        minimum=100,
    ),
    Key(
        "leaseRenewal",
        "lease_renewal",
        Kind.CHOICE,
        "PER_LEASE",
        "PER_LEASE = every worker rewrites every lease it holds each failoverTimeMillis / 3 (Java's way); "
        "PER_WORKER = each worker rewrites one heartbeat item instead, and a lease expires when its counter "
        "and its owner's heartbeat both stood still (either lease mode; fleets of kcl-daemon workers only: "
        "any sign of another worker puts the fleet back on PER_LEASE, with a warning). See Leases.",
        extension=True,
        choices=("PER_LEASE", "PER_WORKER"),
    ),
    Key(
        "shardSyncIntervalMillis",
        "shard_sync_interval_s",
        Kind.MILLIS,
        60000,
        "Time between shard syncs (new shards, resharding).",
        minimum=1,
    ),
    Key(
        "cleanupLeasesUponShardCompletion",
        "cleanup_leases_upon_shard_completion",
        Kind.BOOL,
        True,
        "Delete a finished parent's lease once its children have started. `false` is honoured.",
    ),
    Key(
        "ignoreUnexpectedChildShards",
        "ignore_unexpected_child_shards",
        Kind.BOOL,
        False,
        "Tolerate open children of open parents during shard sync.",
    ),
    Key(
        "maxLeasesForWorker",
        "max_leases_for_worker",
        Kind.INT,
        2**31 - 1,
        "Most leases this worker holds.",
        minimum=1,
    ),
    Key(
        "maxLeasesToStealAtOneTime",
        "max_leases_to_steal_at_one_time",
        Kind.INT,
        1,
        "Most leases taken from other workers per taker run; 0 never steals.",
        minimum=0,
    ),
    Key(
        "maxLeaseRenewalThreads",
        "max_lease_renewal_threads",
        Kind.INT,
        20,
        "Threads renewing leases; checkpoints get a pool of as many beside them.",
        minimum=1,
        maximum=1000,  # each is a thread and an HTTP connection; 2147483647 hangs the start
    ),
    Key(
        "listShardsBackoffTimeInMillis",
        "list_shards_backoff_s",
        Kind.MILLIS,
        1500,
        "Wait between ListShards retries.",
        minimum=0,
    ),
    Key(
        "maxListShardsRetryAttempts",
        "max_list_shards_retry_attempts",
        Kind.INT,
        50,
        "ListShards attempts before a shard sync fails.",
        minimum=1,
    ),
    Key(
        "enablePriorityLeaseAssignment",
        "enable_priority_lease_assignment",
        Kind.BOOL,
        True,
        "Take leases nobody has renewed for 3 x failoverTimeMillis first.",
    ),
    Key(
        "leaseAssignmentIntervalMillis",
        "lease_assignment_interval_s",
        Kind.MILLIS,
        None,
        "Lease assignment period.",
        minimum=1,
        unset="2 x failoverTimeMillis",
    ),
    Key(
        "leaseExpiryCheckIntervalMillis",
        "lease_expiry_check_interval_s",
        Kind.MILLIS,
        None,
        "How often a worker looks for expired leases between full rounds (the 2.x taker's runs, the "
        "leader's balance rounds), and a 3.x worker for leases assigned to it: each look is one scan "
        "(one query) of the lease table.",
        extension=True,
        minimum=50,
        unset="min(1000, failoverTimeMillis / 10)",
    ),
    # --- coordinator, lifecycle, metrics
    Key(
        "parentShardPollIntervalMillis",
        "parent_shard_poll_interval_s",
        Kind.MILLIS,
        10000,
        "How often a child shard checks whether its parents have finished.",
        minimum=1,
    ),
    Key(
        "skipShardSyncAtWorkerInitializationIfLeasesExist",
        "skip_shard_sync_at_worker_initialization_if_leases_exist",
        Kind.BOOL,
        False,
        "Skip the start-up shard sync when the lease table has leases.",
    ),
    Key(
        "taskBackoffTimeMillis",
        "task_backoff_s",
        Kind.MILLIS,
        500,
        "Wait after a failed shard task before retrying it.",
        minimum=0,
    ),
    Key(
        "metricsLevel",
        "metrics_level",
        Kind.CHOICE,
        "DETAILED",
        "CloudWatch metrics detail (namespace: applicationName).",
        choices=("NONE", "SUMMARY", "DETAILED"),
    ),
    Key(
        "metricsEnabledDimensions",
        "metrics_enabled_dimensions",
        Kind.NAMES,
        ("ALL",),
        "Metric dimensions to publish; Operation is always included.",
        choices=("ALL", "Operation", "ShardId", "WorkerIdentifier", "StreamId"),
    ),
    Key(
        "metricsBufferTimeMillis",
        "metrics_buffer_time_s",
        Kind.MILLIS,
        10000,
        "How often CloudWatch metrics are published (one batch of PutMetricData calls per interval).",
        minimum=1,
    ),
    Key(
        "metricsMaxQueueSize",
        "metrics_max_queue_size",
        Kind.INT,
        10000,
        "CloudWatch data points waiting to be published; more are dropped and counted.",
        minimum=1,
    ),
    # --- kcl-daemon's own
    Key(
        "cloudWatchEndpoint",
        "cloudwatch_endpoint",
        Kind.URL,
        None,
        "CloudWatch endpoint. With kinesisEndpoint or dynamoDBEndpoint set, or with `run --local`, "
        "CloudWatch metrics are published only when this is set.",
        extension=True,
        unset="the region's",
    ),
    Key(
        "childChannel",
        "child_channel",
        Kind.BOOL,
        True,
        "Offer the child the log/metric channel in initialize (a field old children ignore).",
        extension=True,
    ),
    Key(
        "shardsPerChild",
        "shards_per_child",
        Kind.INT,
        1,
        "Above 1: offer each child lanes for this many shards; children that accept (the project's "
        "Python, Node and Go clients given a processor factory) serve several shards in one process, "
        "others (amazon_kclpy, aws-kcl, the shell client, a processor instance) one shard each as before "
        "(protocol README section 11).",
        extension=True,
        minimum=1,
        maximum=1024,
    ),
    Key(
        "leaseClusterSeparator",
        "lease_cluster_separator",
        Kind.STRING,
        "-",
        "`kcl-daemon leases` groups workers into clusters by the part of the worker id before this.",
        extension=True,
    ),
    Key(
        "workerZone",
        "worker_zone",
        Kind.STRING,
        None,
        "This worker's zone for zone-balanced assignment (3.x mode), published with its worker metrics.",
        extension=True,
        unset="from the environment (zoneFromEnvironment), else the workerId part before "
        "leaseClusterSeparator",
    ),
    Key(
        "zoneFromEnvironment",
        "zone_from_environment",
        Kind.BOOL,
        False,
        "Ask ECS task metadata, then EC2 instance metadata, for the availability zone at start.",
        extension=True,
    ),
    Key(
        "restartGraceMillis",
        "restart_grace_s",
        Kind.MILLIS,
        0,
        "On a graceful stop, keep this worker's leases for it this long (either lease mode, stable "
        "workerId; each lease is marked with the grace): a restart within it moves nothing; 0 hands "
        "them off at once.",
        extension=True,
        minimum=0,
    ),
    Key(
        "maxHandoffsPerWorker",
        "max_handoffs_per_worker",
        Kind.INT,
        2,
        "At most this many planned hand-offs away from one worker per assignment round.",
        extension=True,
        minimum=1,
    ),
    Key(
        "initializeTimeoutInSeconds",
        "initialize_timeout_s",
        Kind.SECONDS,
        None,
        "Timeout for the answer to initialize.",
        extension=True,
        minimum=0.001,
        unset="timeoutInSeconds",
    ),
    Key(
        "processRecordsTimeoutInSeconds",
        "process_records_timeout_s",
        Kind.SECONDS,
        None,
        "Timeout for each message while a batch is processed.",
        extension=True,
        minimum=0.001,
        unset="timeoutInSeconds",
    ),
    Key(
        "shutdownTimeoutInSeconds",
        "shutdown_timeout_s",
        Kind.SECONDS,
        None,
        "Timeout for leaseLost, shardEnded and shutdownRequested.",
        extension=True,
        minimum=0.001,
        unset="timeoutInSeconds",
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
    # --- KCL 3.x lease assignment
    Key(
        "clientVersionConfig",
        "client_version_config",
        Kind.CHOICE,
        "CLIENT_VERSION_CONFIG_3X",
        "Lease algorithm: 3X = one elected leader assigns (KCL 3.x); COMPATIBLE_WITH_2X = the 2.x taker, "
        "for fleets with KCL 2.x workers (flips to 3.x when the fleet's Migration3.0 item says so); "
        "COMPATIBLE_WITH_2X_PHASE1 = pure 2.x, writes nothing. The fleet's Migration3.0 item overrides it.",
        choices=(
            "CLIENT_VERSION_CONFIG_3X",
            "CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X",
            "CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1",
        ),
    ),
    Key(
        "leaseAssignmentStrategy",
        "lease_assignment_strategy",
        Kind.CHOICE,
        "COOPERATIVE",
        "3.x leader's decider: COOPERATIVE = kcl-daemon's sticky, zone-aware assignor (see Balancing); "
        "VARIANCE = Java's VarianceBasedLeaseAssignmentDecider (CPU and throughput); "
        "LEASE_COUNT_BASED = equal lease counts (Java's LeaseCountBasedLeaseAssignmentDecider).",
        extension=True,
        choices=("COOPERATIVE", "VARIANCE", "LEASE_COUNT_BASED"),
    ),
    Key(
        "gracefulLeaseHandoffTimeoutMillis",
        "graceful_lease_handoff_timeout_s",
        Kind.MILLIS,
        30000,
        "3.x: how long the owner of a lease being moved waits for its processor to checkpoint after "
        "shutdownRequested before it hands the lease over anyway.",
        minimum=0,
    ),
    Key(
        "isGracefulLeaseHandoffEnabled",
        "graceful_lease_handoff",
        Kind.BOOL,
        True,
        "3.x: balancing moves are hand-offs (checkpoint first); false = the old owner just loses the lease.",
    ),
    Key(
        "inMemoryWorkerMetricsCaptureFrequencyMillis",
        "worker_metrics_capture_s",
        Kind.MILLIS,
        1000,
        "3.x: how often the CPU of the daemon and its children is sampled.",
        minimum=1,
    ),
    Key(
        "workerMetricsReporterFreqInMillis",
        "worker_metrics_report_s",
        Kind.MILLIS,
        30000,
        "3.x: how often this worker's WorkerMetricStats item is written (stale after 2 x this).",
        minimum=1,
    ),
    Key(
        "noOfPersistedMetricsPerWorkerMetrics",
        "worker_metrics_history",
        Kind.INT,
        10,
        "3.x: samples kept per metric in the WorkerMetricStats item.",
        minimum=1,
    ),
    Key(
        "disableWorkerMetrics",
        "disable_worker_metrics",
        Kind.BOOL,
        False,
        "3.x: publish the WorkerMetricStats item without CPU (the leader then balances by throughput). "
        "Without it a worker reports no CPU anyway while live Java workers report none.",
    ),
    Key(
        "dampeningPercentage",
        "dampening_percent",
        Kind.INT,
        60,
        "3.x VARIANCE: share of the computed excess load moved in one balancing run.",
        minimum=1,
        maximum=100,
    ),
    Key(
        "reBalanceThresholdPercentage",
        "rebalance_threshold_percent",
        Kind.INT,
        10,
        "3.x VARIANCE: workers within this percentage of the fleet average are left alone.",
        minimum=1,
        maximum=100,
    ),
    Key(
        "allowThroughputOvershoot",
        "allow_throughput_overshoot",
        Kind.BOOL,
        True,
        "3.x VARIANCE: may move the smallest lease even if that moves more than the computed amount.",
    ),
    Key(
        "varianceBalancingFrequency",
        "variance_balancing_frequency",
        Kind.INT,
        3,
        "3.x VARIANCE: balance on every Nth assignment run (the others only place unowned leases).",
        minimum=1,
    ),
    Key(
        "workerMetricsTableName",
        "worker_metrics_table_name",
        Kind.STRING,
        None,
        "3.x: the WorkerMetricStats table of the KCL 3.0-3.4 layout (a single-table application keeps worker "
        "metrics in the lease table).",
        unset="<applicationName>-WorkerMetricStats",
    ),
    Key(
        "coordinatorStateTableName",
        "coordinator_state_table_name",
        Kind.STRING,
        None,
        "3.x: the table of the Leader lock and the Migration3.0 item in the KCL 3.0-3.4 layout; its "
        "TableMigration3.5 item says how far the move into the lease table has got.",
        unset="<applicationName>-CoordinatorState",
    ),
    # --- KCL 3.5: the single-table layout, the table migration, the leader lock, big tables
    Key(
        "leaseTableLayout",
        "lease_table_layout",
        Kind.CHOICE,
        None,
        "Where a new application keeps its Leader lock, Migration3.0 and worker metrics: SINGLE_TABLE = in "
        "the lease table, as KCL 3.5 does; KCL_3_0_TO_3_4 = in <applicationName>-CoordinatorState and "
        "<applicationName>-WorkerMetricStats, created as KCL 3.0-3.4 do (set it while the fleet still runs "
        "Java 3.0-3.4 workers). Unset, kcl-daemon uses the side tables while KCL 2.x workers may read the "
        "lease table (a 2.x-compatible clientVersionConfig, or leases owned by 2.x workers), and moves its "
        "items out of a lease table that already holds them; else the single table. Only matters when the "
        "coordinator-state table does not exist: an existing one is always followed through the table "
        "migration. See Migrating from the Java daemon.",
        extension=True,
        choices=("SINGLE_TABLE", "KCL_3_0_TO_3_4"),
        unset="SINGLE_TABLE, or the side tables while KCL 2.x workers are about",
    ),
    Key(
        "migrateAllEntitiesToLeaseTable",
        "migrate_all_entities_to_lease_table",
        Kind.BOOL,
        False,
        "3.x: move a KCL 3.0-3.4 application's coordinator state and worker metrics into its lease table "
        "(the KCL 3.5 table migration; takes effect once the migration is DEPLOYED). False on a leader "
        "that finds the migration PENDING rolls it back.",
    ),
    Key(
        "tableMigrationCompleteBakeTimeSeconds",
        "table_migration_complete_bake_s",
        Kind.SECONDS,
        86400,
        "3.x: how long the table migration stays PENDING before COMPLETE (Java clamps it to "
        "3600-604800; kcl-daemon honours lower values, with a warning, for tests).",
        minimum=0,
    ),
    Key(
        "tableMigrationInitBakeTimeSeconds",
        "table_migration_init_bake_s",
        Kind.SECONDS,
        3600,
        "3.x: how long the table migration stays INIT before DEPLOYED (fixed at 3600 in Java; lower it "
        "only for tests).",
        extension=True,
        minimum=0,
    ),
    Key(
        "leaseTableScanTotalSegments",
        "lease_table_scan_total_segments",
        Kind.INT,
        0,
        "Parallel-scan segments for full lease-table scans (the leader's assignment scan, the 2.x taker, "
        "shard sync); 0 = Java's automatic sizing: one per 0.2 GB of table, 1-32.",
        minimum=0,
        maximum=32,
    ),
    Key(
        "dynamoDbLockBasedLeaderLeaseDurationInMillis",
        "leader_lock_duration_s",
        Kind.MILLIS,
        None,
        "3.x: the leader lock's duration (Java's name; Java's multilang cannot set it and uses 120000). A "
        "lock whose recordVersionNumber has not changed for the duration written in it is taken over.",
        extension=True,
        minimum=1,
        unset="failoverTimeMillis",
    ),
    Key(
        "dynamoDbLockBasedLeaderHeartbeatPeriodInMillis",
        "leader_lock_heartbeat_s",
        Kind.MILLIS,
        None,
        "3.x: how often the leader renews its lock (Java's name; Java uses 30000). At most half the lock "
        "duration.",
        extension=True,
        minimum=1,
        unset="a quarter of the lock duration",
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
    Key(
        "childStallWarningMillis",
        "child_stall_warning_s",
        Kind.MILLIS,
        60000,
        "Warn (once per stall) when a child has not written a line for this long while an action is "
        "outstanding; the status line lists stalled shards. 0 disables.",
        extension=True,
        minimum=0,
    ),
    Key(
        "shardStallMillis",
        "shard_stall_s",
        Kind.MILLIS,
        300000,
        "A shard is stalled when it is behind the tip (records wait for its child, or millisBehindLatest "
        "> 0) and its child has finished no processRecords for this long: `/readyz` turns red and "
        "`kcl-daemon doctor` reports shards stuck that long. 0 disables the check.",
        extension=True,
        minimum=0,
    ),
    # --- poison records (docs/failures.md)
    Key(
        "poisonRecordPolicy",
        "poison_record_policy",
        Kind.CHOICE,
        "RETRY",
        "What happens to a batch the processor fails on (it exits, times out, or reports an exception "
        "it swallowed) maxDeliveryAttempts times: RETRY redelivers it for ever (as the Java daemon); "
        "SKIP and DEAD_LETTER bisect it down to the records that fail on their own and skip them, or "
        "write them to deadLetterDestination first.",
        extension=True,
        choices=("RETRY", "SKIP", "DEAD_LETTER"),
    ),
    Key(
        "maxDeliveryAttempts",
        "max_delivery_attempts",
        Kind.INT,
        3,
        "Deliveries of the same batch that fail before it is bisected (SKIP and DEAD_LETTER).",
        extension=True,
        minimum=1,
        maximum=100,
    ),
    Key(
        "deadLetterDestination",
        "dead_letter_destination",
        Kind.STRING,
        None,
        "Where DEAD_LETTER writes the records set aside: sqs://QUEUE_URL_OR_NAME, kinesis://STREAM, "
        "s3://BUCKET/PREFIX or file:///DIRECTORY (JSON lines, created if missing).",
        extension=True,
        unset="none (required by DEAD_LETTER)",
    ),
)

#: every name and alias -> its key (credentials keys are matched case-insensitively: see lookup_key)
KEYS_BY_NAME: Final[dict[str, Key]] = {name: key for key in KEYS for name in key.names}
KEYS_BY_FIELD: Final[dict[str, Key]] = {key.field: key for key in KEYS}

_CREDENTIALS_BY_LOWER: Final[dict[str, Key]] = {
    key.name.lower(): key for key in KEYS if key.kind is Kind.CREDENTIALS
}


@dataclass(frozen=True, slots=True)
class IgnoredKey:
    name: str
    reason: str
    #: legacy (KCL 1.x) keys the Java 2.x/3.x daemon does not know either: using one earns a warning
    warn: bool = False


_PRESENCE = "only whether it is set counts: setting it selects polling when retrievalMode is DEFAULT"
_THREE_X = "not implemented in kcl-daemon's KCL 3.x mode"
_LEGACY_TABLES = "the coordinator and worker-metrics tables are created on-demand without extras"

IGNORED_KEYS: Final[tuple[IgnoredKey, ...]] = (
    IgnoredKey("maxActiveThreads", "children are asyncio tasks; there is no thread pool to bound"),
    IgnoredKey("retryGetRecordsInSeconds", _PRESENCE),
    IgnoredKey("maxGetRecordsThreadPool", _PRESENCE),
    IgnoredKey(
        "initialLeaseTableReadCapacity",
        "the lease table is created on-demand (PAY_PER_REQUEST), as by Java multilang",
    ),
    IgnoredKey(
        "initialLeaseTableWriteCapacity",
        "the lease table is created on-demand (PAY_PER_REQUEST), as by Java multilang",
    ),
    IgnoredKey("leaseTableDeletionProtectionEnabled", "set deletion protection on the table yourself"),
    IgnoredKey("leaseTablePitrEnabled", "set point-in-time recovery on the table yourself"),
    IgnoredKey("schedulerInitializationBackoffTimeMillis", "kcl-daemon's start-up does not use it"),
    IgnoredKey("shardPrioritization", "not settable from a properties file in Java either"),
    IgnoredKey("logWarningForTaskAfterMillis", "child timeouts (timeoutInSeconds) cover slow tasks"),
    IgnoredKey("maxThroughputPerHostKBps", _THREE_X),
    IgnoredKey("workerMetricsEMAAlpha", _THREE_X),
    IgnoredKey("staleWorkerMetricsEntryCleanupDuration", _THREE_X),
    *(
        IgnoredKey(f"{table}{suffix}", _LEGACY_TABLES)
        for table in ("workerMetrics", "coordinatorState")
        for suffix in (
            "BillingMode",
            "ReadCapacity",
            "WriteCapacity",
            "PointInTimeRecoveryEnabled",
            "DeletionProtectionEnabled",
            "Tags",
        )
    ),
    # KCL 1.x keys (contract §2.4): the Java 2.x/3.x daemon drops them silently; we say so.
    IgnoredKey(
        "timestampAtInitialPositionInStream",
        "a KCL 1.x key; use initialPositionInStreamExtended (epoch seconds)",
        warn=True,
    ),
    IgnoredKey("billingMode", "a KCL 1.x key; the lease table is created on-demand", warn=True),
    IgnoredKey(
        "skipShardSyncAtStartupIfLeasesExist",
        "a KCL 1.x key; it is now skipShardSyncAtWorkerInitializationIfLeasesExist",
        warn=True,
    ),
    *(
        IgnoredKey(name, "a KCL 1.x key with no effect since KCL 2.x", warn=True)
        for name in (
            "idleMillisBetweenCalls",
            "maxCacheByteSize",
            "maxRecordsCount",
            "maxPendingProcessRecordsInput",
            "dataFetchingStrategy",
            "shardSyncStrategyType",
            "userAgent",
            "commonClientConfig",
            "kinesisClientConfig",
            "dynamoDBClientConfig",
            "cloudWatchClientConfig",
            "leaseCleanupIntervalMillis",
            "completedLeaseCleanupThresholdMillis",
            "garbageLeaseCleanupThresholdMillis",
            "maxInitializationAttempts",
        )
    ),
)

IGNORED_BY_NAME: Final[dict[str, IgnoredKey]] = {key.name: key for key in IGNORED_KEYS}


def lookup_key(name: str) -> Key | None:
    """The key ``name`` sets, if any. Credentials keys match case-insensitively, as in Java 2.7+."""
    key = KEYS_BY_NAME.get(name)
    if key is None:
        key = _CREDENTIALS_BY_LOWER.get(name.lower())
    return key


def _default_text(key: Key) -> str:
    if key.default is None:
        return key.unset
    if key.kind is Kind.BOOL:
        return str(key.default).lower()
    if isinstance(key.default, tuple):
        return ",".join(str(v) for v in key.default)
    return str(key.default)


def _type_text(key: Key) -> str:
    if key.kind in (Kind.CHOICE, Kind.NAMES, Kind.POSITION):
        return f"{key.kind.value} " + ", ".join(key.choices)
    text: str = key.kind.value
    if key.minimum is not None and key.maximum is not None:
        text += f" {key.minimum:g}-{key.maximum:g}"
    elif key.minimum is not None and key.minimum > 0:
        text += f" ≥ {key.minimum:g}"
    return text


def markdown_table() -> str:
    """The README's key table, generated from :data:`KEYS` (a test keeps the two in sync)."""
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key in KEYS:
        name = f"`{key.name}`" + (" *(kcl-daemon)*" if key.extension else "")
        if key.aliases:
            name += " (also " + ", ".join(f"`{a}`" for a in key.aliases) + ")"
        doc = key.doc.replace("|", "\\|")
        lines.append(f"| {name} | {_type_text(key)} | {_default_text(key)} | {doc} |")
    return "\n".join(lines)


def markdown_ignored() -> str:
    """The README's list of accepted-but-ignored Java keys, generated from :data:`IGNORED_KEYS`."""
    by_reason: dict[tuple[str, bool], list[str]] = {}
    for key in IGNORED_KEYS:
        by_reason.setdefault((key.reason, key.warn), []).append(f"`{key.name}`")
    lines = ["| keys | why they have no effect |", "| --- | --- |"]
    for (reason, warn), names in by_reason.items():
        lines.append(f"| {', '.join(names)} | {reason}{'; warns when set' if warn else ''} |")
    return "\n".join(lines)
