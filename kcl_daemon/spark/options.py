"""The Spark source's and sink's options: case-insensitive strings in, one frozen (picklable) dataclass out.

Other connectors' names (the awslabs connector's ``kinesis.*``, Databricks') are resolved onto ours
first (:mod:`kcl_daemon.core.spark.aliases`); an option we do not support fails with the name of what
to use instead. Every problem found is collected and raised together as one
:class:`~kcl_daemon.errors.ConfigError`, so a query with three bad options fails at start with one
message naming all three. Pure: no I/O; credentials never appear in ``repr``.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, TypeVar

from kcl_daemon.core.spark.aliases import resolve
from kcl_daemon.core.spark.offsets import StartingPosition, StartKind
from kcl_daemon.errors import ConfigError

logger = logging.getLogger(__name__)
T = TypeVar("T")

MIN_FETCH_INTERVAL_MS: Final = 200  # 5 GetRecords calls per second per shard, the service's limit
MAX_GET_RECORDS_LIMIT: Final = 10_000
DEFAULT_METADATA_TABLE: Final = "kcl-daemon-spark"
#: KPL's default aggregate size; an aggregate (with its partition key) must stay within 1 MiB.
DEFAULT_AGGREGATION_MAX_BYTES: Final = 51_200
MAX_AGGREGATION_BYTES: Final = 1024 * 1024 - 4096
#: What a task may hold of one shard's rows before it publishes the shard's end and hands them to Spark
#: (estimated as :func:`kcl_daemon.spark.rows.held_bytes` counts them). A bound in bytes, not records:
#: 100,000 records are 50 MB of 100-byte records but 2.5 GB of 25 KB ones.
DEFAULT_MAX_BYTES_PER_SHARD_PER_BATCH: Final = 128 * 1024 * 1024
#: The per-shard row share written into an offset when no row cap applies (the bytes budget ends reads).
NO_ROW_CAP: Final = 2**31 - 1
FROM_LATEST: Final = StartingPosition(StartKind.LATEST)
FROM_TRIM_HORIZON: Final = StartingPosition(StartKind.TRIM_HORIZON)

__all__ = [
    "Credentials",
    "ReadMode",
    "SinkOptions",
    "SourceOptions",
    "StartKind",
    "StartingPosition",
    "parse_options",
    "parse_sink_options",
]


class ReadMode(enum.StrEnum):
    EXECUTOR = "executor"  # executors fetch, the driver plans (offsets v2)
    DRIVER = "driver"  # the driver reads every record while planning (offsets v1)


class ConsumerMode(enum.StrEnum):
    POLLING = "polling"  # GetRecords
    EFO = "efo"  # enhanced fan-out: SubscribeToShard


@dataclass(frozen=True, slots=True)
class Credentials:
    access_key_id: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    profile: str | None = None
    provider_chain: str | None = field(default=None, repr=False)  # the daemon's AWSCredentialsProvider syntax


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Everything the reader needs, parsed and checked. Seconds as floats inside."""

    stream_name: str
    region: str | None = None
    endpoint_url: str | None = None
    credentials: Credentials = field(default_factory=Credentials)
    starting_position: StartingPosition = FROM_LATEST
    lease_fallback_position: StartingPosition = FROM_TRIM_HORIZON
    read_mode: ReadMode = ReadMode.EXECUTOR
    max_records_per_batch: int | None = None
    max_records_per_shard_per_batch: int | None = None  # None: only the bytes budget
    max_bytes_per_shard_per_batch: int = DEFAULT_MAX_BYTES_PER_SHARD_PER_BATCH
    get_records_limit: int = MAX_GET_RECORDS_LIMIT
    min_fetch_interval_s: float = MIN_FETCH_INTERVAL_MS / 1000
    max_fetch_calls_per_shard_per_batch: int = 20  # driver reads only
    shard_discovery_interval_s: float = 1.0
    kpl_deaggregate: bool = True
    fail_on_data_loss: bool = True
    shards_per_task: int = 1
    ship_records_max: int = 200_000  # driver reads: a batch's probed rows handed to executors (0: never)
    # enhanced fan-out (executor reads)
    consumer_mode: ConsumerMode = ConsumerMode.POLLING
    consumer_name: str | None = None
    require_consumer_deregistration: bool = False
    # DynamoDB: the lease table (None: off), else the metadata table the ends are published to
    lease_table_name: str | None = None
    metadata_table_name: str = DEFAULT_METADATA_TABLE
    dynamodb_region: str | None = None
    dynamodb_endpoint_url: str | None = None
    lease_owner: str | None = None
    lease_failover_s: float = 10.0
    lease_wait_timeout_s: float = 0.0  # 0: refuse to start while other workers hold live leases

    @property
    def per_shard_row_cap(self) -> int:
        """Rows one shard may give one batch: ``maxRecordsPerShardPerBatch``, else no row cap."""
        cap = self.max_records_per_shard_per_batch
        return NO_ROW_CAP if cap is None else cap

    @property
    def ends_table(self) -> str:
        """The DynamoDB table executors publish their ends to."""
        return self.lease_table_name or self.metadata_table_name


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """The Kinesis sink's options."""

    stream_name: str
    region: str | None = None
    endpoint_url: str | None = None
    credentials: Credentials = field(default_factory=Credentials)
    aggregation_enabled: bool = False
    aggregation_max_bytes: int = DEFAULT_AGGREGATION_MAX_BYTES


_CONNECTION_DOCS: Final[dict[str, tuple[str, str]]] = {
    "streamName": ("required", "The stream to read (or, for the sink, to write)."),
    "region": ("boto3's", "AWS region (else `AWS_DEFAULT_REGION` / `~/.aws/config`)."),
    "endpointUrl": ("boto3's", "Kinesis endpoint (emulators, VPC endpoints); never used for DynamoDB."),
    "awsAccessKeyId": ("unset", "Static access key id (with `awsSecretKey`, optional `sessionToken`)."),
    "awsSecretKey": ("unset", "Static secret key; never logged."),
    "sessionToken": ("unset", "Session token of temporary static keys."),
    "profile": ("unset", "A named profile of `~/.aws/config` instead of static keys."),
    "awsCredentialsProvider": (
        "boto3's chain",
        "The daemon's `AWSCredentialsProvider` syntax "
        "(e.g. `STSAssumeRoleSessionCredentialsProvider|arn|name`).",
    ),
    "roleArn": ("unset", "Assume this IAM role (with `roleSessionName`) on top of the default chain."),
    "roleSessionName": ("`kcl-daemon-spark`", "Session name of the assumed role."),
    "roleExternalId": ("unset", "External id of the assumed role; never logged."),
    "stsEndpointUrl": ("boto3's", "STS endpoint for `roleArn`."),
}

#: option name -> (default, meaning): the source's options table in docs/spark.md is generated from this.
OPTION_DOCS: Final[dict[str, tuple[str, str]]] = {
    **_CONNECTION_DOCS,
    "startingPosition": (
        "`LATEST` (`leaseTable` with `leaseTableName`)",
        "`TRIM_HORIZON`, `LATEST`, `AT_TIMESTAMP:<ISO-8601 with zone>` or `leaseTable` "
        "(the KCL checkpoints). Only for a new query: a restarted one continues from its checkpointLocation.",
    ),
    "leaseTableFallbackPosition": (
        "`TRIM_HORIZON`",
        "Where shards without a lease start (with `leaseTable`).",
    ),
    "readMode": (
        "`executor`",
        "`executor`: executors fetch, the driver plans; `driver`: the driver reads every record while "
        "planning (no DynamoDB needed; small streams).",
    ),
    "maxRecordsPerBatch": ("unset", "Rows per micro-batch (`ReadMaxRows`), split over the shards read."),
    "maxRecordsPerShardPerBatch": (
        "unset",
        "Rows per shard per micro-batch, also under `availableNow` (with `maxBytesPerShardPerBatch`: "
        "whichever comes first).",
    ),
    "maxBytesPerShardPerBatch": (
        f"{DEFAULT_MAX_BYTES_PER_SHARD_PER_BATCH} (128 MiB)",
        "Memory a task may hold of one shard's rows before it hands them to Spark (payload and "
        "partition key plus about 400 bytes per record): a shard's part of a micro-batch ends there, "
        "also under `availableNow`.",
    ),
    "getRecordsLimit": ("10000", "`Limit` of each GetRecords call (1..10000)."),
    "minFetchIntervalMs": ("200", "Least time between two GetRecords calls on a shard (≥ 200: 5 calls/s)."),
    "shardDiscoveryIntervalMs": (
        "1000",
        "How long a ListShards result is reused (resharding is seen after it).",
    ),
    "kplDeaggregate": (
        "true",
        "Split KPL aggregates into user records (`subSequenceNumber`, `explicitHashKey`).",
    ),
    "failOnDataLoss": (
        "true",
        "Fail when records planned for a batch were trimmed; else skip with a warning.",
    ),
    "shardsPerTask": (
        "1",
        "Shards read by one Spark task, up to 8 at once (fewer tasks for streams with many shards).",
    ),
    "consumerMode": ("`polling`", "`polling` (GetRecords) or `efo` (enhanced fan-out, SubscribeToShard)."),
    "consumerName": (
        "required with `efo`",
        "The stream consumer to read through; registered at start if missing, reused otherwise.",
    ),
    "requireConsumerDeregistration": (
        "false",
        "Deregister the consumer when the query stops (never after a crash: the next start reuses it).",
    ),
    "leaseTableName": (
        "unset",
        "The KCL lease table (the daemons' `applicationName`): join the fleet; ends are published there.",
    ),
    "metadataTableName": (
        f"`{DEFAULT_METADATA_TABLE}`",
        "Without `leaseTableName`: the DynamoDB table executors publish where their reads ended "
        "(created if missing; items expire after 7 days).",
    ),
    "dynamoDbRegion": ("`region`", "Region of the lease or metadata table."),
    "dynamoDbEndpointUrl": (
        "boto3's",
        "DynamoDB endpoint of the lease or metadata table (an emulator: set it too, even to `endpointUrl`).",
    ),
    "leaseOwner": ("`spark:<leaseTableName>`", "Worker id the query writes into the leases it holds."),
    "leaseFailoverMs": (
        "10000",
        "The fleet's `failoverTimeMillis`: 3 times the renewal period and liveness window.",
    ),
    "leaseWaitTimeoutMs": (
        "0",
        "How long to wait for running workers to let go of their leases (0: refuse).",
    ),
    "maxFetchCallsPerShardPerBatch": ("20", "`readMode=driver`: GetRecords calls per shard while planning."),
    "shipRecordsMax": (
        "200000",
        "`readMode=driver`: rows per batch the driver hands to executors from its planning read "
        "(0: executors read Kinesis again).",
    ),
}
OPTION_NAMES: Final = tuple(OPTION_DOCS)

#: the sink's options table in docs/spark.md
SINK_OPTION_DOCS: Final[dict[str, tuple[str, str]]] = {
    **_CONNECTION_DOCS,
    "aggregationEnabled": (
        "false",
        "Pack user records bound for one shard into KPL aggregates (read back whole by KCL, the daemon "
        "and this source).",
    ),
    "aggregationMaxBytes": (
        str(DEFAULT_AGGREGATION_MAX_BYTES),
        f"Largest aggregate, in bytes (up to {MAX_AGGREGATION_BYTES}).",
    ),
}


def markdown_table(docs: Mapping[str, tuple[str, str]] = OPTION_DOCS) -> str:
    """A table of options (the source's by default) for docs/spark.md."""
    lines = ["| Option | Default | Meaning |", "|---|---|---|"]
    lines += [f"| `{name}` | {default} | {meaning} |" for name, (default, meaning) in docs.items()]
    return "\n".join(lines)


# Options Spark itself passes to every source and sink (the path of load(), a stream's checkpoint):
# never ours to refuse.
_SPARK_OWN: Final = frozenset({"path", "paths", "checkpointlocation", "queryname"})


class _Parser:
    def __init__(self, raw: Mapping[str, str], known: tuple[str, ...], other: tuple[str, ...]) -> None:
        by_lower = {name.lower(): name for name in known}
        resolved = resolve(raw, {**{n.lower(): n for n in other}, **by_lower})
        if resolved.mapped:
            logger.info("kinesis options of other connectors: %s", ", ".join(resolved.mapped))
        self.values: dict[str, str] = {}
        self.problems: list[str] = list(resolved.problems)
        others = {name.lower() for name in other}
        for key, value in resolved.options.items():
            name = by_lower.get(key.lower())
            if name is None:
                if key.lower() in others:
                    self.problems.append(
                        f"option {key!r} does not apply here (it is for the other direction)"
                    )
                elif key.lower() not in _SPARK_OWN:
                    self.problems.append(f"option {key!r} is unknown (known: {', '.join(known)})")
                continue
            self.values[name] = str(value).strip()

    def text(self, name: str) -> str | None:
        value = self.values.get(name)
        return value if value else None

    def _convert(self, name: str, default: T, convert: Callable[[str], T], what: str) -> T:
        value = self.text(name)
        if value is None:
            return default
        try:
            return convert(value)
        except ValueError:
            self.problems.append(f"option {name}={value!r} is not {what}")
            return default

    def integer(self, name: str, default: int, *, minimum: int, maximum: int | None = None) -> int:
        number = self._convert(name, default, int, "an integer")
        if number < minimum or (maximum is not None and number > maximum):
            upper = "" if maximum is None else f" and at most {maximum}"
            self.problems.append(f"option {name}={number} must be at least {minimum}{upper}")
            return default
        return number

    def optional_integer(self, name: str, *, minimum: int) -> int | None:
        if self.text(name) is None:
            return None
        return self.integer(name, minimum, minimum=minimum)

    def boolean(self, name: str, default: bool) -> bool:
        def convert(text: str) -> bool:
            lowered = text.lower()
            if lowered not in ("true", "false"):
                raise ValueError(text)
            return lowered == "true"

        return self._convert(name, default, convert, "true or false")

    def choice(self, name: str, default: T, kinds: type[enum.StrEnum]) -> T:
        value = self.text(name)
        if value is None:
            return default
        for kind in kinds:
            if kind.value == value.lower():
                return kind  # type: ignore[return-value]
        self.problems.append(f"option {name}={value!r} is not one of {', '.join(k.value for k in kinds)}")
        return default

    def position(self, name: str, default: StartingPosition, *, allow_lease: bool) -> StartingPosition:
        value = self.text(name)
        if value is None:
            return default
        upper = value.upper()
        if upper in ("TRIM_HORIZON", "EARLIEST"):
            return StartingPosition(StartKind.TRIM_HORIZON)
        if upper == "LATEST":
            return StartingPosition(StartKind.LATEST)
        if allow_lease and value.lower() in ("leasetable", "kcl_lease_table"):
            return StartingPosition(StartKind.LEASE_TABLE)
        for prefix in ("AT_TIMESTAMP:", "AT_TIMESTAMP "):
            if upper.startswith(prefix):
                stamp = value[len(prefix) :].strip()
                try:
                    parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                except ValueError:
                    break
                if parsed.tzinfo is None:
                    self.problems.append(f"option {name}={value!r}: the timestamp needs a timezone (Z)")
                    return default
                return StartingPosition(StartKind.AT_TIMESTAMP, int(parsed.timestamp() * 1000))
        choices = "TRIM_HORIZON, LATEST, AT_TIMESTAMP:<ISO-8601 with zone>" + (
            ", leaseTable" if allow_lease else ""
        )
        self.problems.append(f"option {name}={value!r} is not one of {choices}")
        return default

    def credentials(self) -> Credentials:
        access, secret = self.text("awsAccessKeyId"), self.text("awsSecretKey")
        if (access is None) != (secret is None):
            self.problems.append("options awsAccessKeyId and awsSecretKey must be given together")
        chain = self.text("awsCredentialsProvider")
        role = self.text("roleArn")
        if role is not None:
            if chain is not None:
                self.problems.append("options roleArn and awsCredentialsProvider exclude each other")
            parts = [
                "STSAssumeRoleSessionCredentialsProvider",
                role,
                self.text("roleSessionName") or "kcl-daemon-spark",
            ]
            external, sts = self.text("roleExternalId"), self.text("stsEndpointUrl")
            if external is not None:
                parts.append(f"externalId={external}")
            if sts is not None:
                parts.append(f"endpoint={sts}")
            chain = "|".join(parts)
        else:
            for dependent in ("roleSessionName", "roleExternalId", "stsEndpointUrl"):
                if self.text(dependent) is not None:
                    self.problems.append(f"option {dependent} needs roleArn")
        credentials = Credentials(
            access_key_id=access,
            secret_key=secret,
            session_token=self.text("sessionToken"),
            profile=self.text("profile"),
            provider_chain=chain,
        )
        given = [access, credentials.profile, chain]
        if sum(x is not None for x in given) > 1:
            self.problems.append(
                "options awsAccessKeyId, profile and awsCredentialsProvider (or roleArn) exclude each other"
            )
        return credentials

    def stream(self) -> str:
        stream = self.text("streamName")
        if stream is None:
            self.problems.append("option streamName is required")
        elif "," in stream:
            self.problems.append(
                "option streamName names several streams: one query reads one stream (read each in its "
                "own query and unionByName the frames)"
            )
        return stream or ""


def parse_options(raw: Mapping[str, str]) -> SourceOptions:
    """The source's checked options, or :class:`ConfigError` listing every problem (each naming its
    option)."""
    p = _Parser(raw, OPTION_NAMES, tuple(name for name in SINK_OPTION_DOCS if name not in OPTION_DOCS))
    stream = p.stream()
    credentials = p.credentials()
    lease_table = p.text("leaseTableName")
    default_start = StartKind.LEASE_TABLE if lease_table else StartKind.LATEST
    start = p.position("startingPosition", StartingPosition(default_start), allow_lease=True)
    if start.kind is StartKind.LEASE_TABLE and lease_table is None:
        p.problems.append("option startingPosition=leaseTable needs leaseTableName")
    fetch_interval_ms = p.integer("minFetchIntervalMs", MIN_FETCH_INTERVAL_MS, minimum=MIN_FETCH_INTERVAL_MS)
    read_mode = p.choice("readMode", ReadMode.EXECUTOR, ReadMode)
    consumer_mode = p.choice("consumerMode", ConsumerMode.POLLING, ConsumerMode)
    consumer_name = p.text("consumerName")
    if consumer_mode is ConsumerMode.EFO:
        if consumer_name is None:
            p.problems.append(
                "option consumerMode=efo needs consumerName (one per application: two queries on one "
                "consumer would take each other's subscriptions)"
            )
        if read_mode is ReadMode.DRIVER:
            p.problems.append("option consumerMode=efo reads on executors: it needs readMode=executor")
    options = SourceOptions(
        stream_name=stream,
        region=p.text("region"),
        endpoint_url=p.text("endpointUrl"),
        credentials=credentials,
        starting_position=start,
        lease_fallback_position=p.position(
            "leaseTableFallbackPosition", StartingPosition(StartKind.TRIM_HORIZON), allow_lease=False
        ),
        read_mode=read_mode,
        max_records_per_batch=p.optional_integer("maxRecordsPerBatch", minimum=1),
        max_records_per_shard_per_batch=p.optional_integer("maxRecordsPerShardPerBatch", minimum=1),
        max_bytes_per_shard_per_batch=p.integer(
            "maxBytesPerShardPerBatch", DEFAULT_MAX_BYTES_PER_SHARD_PER_BATCH, minimum=1
        ),
        get_records_limit=p.integer(
            "getRecordsLimit", MAX_GET_RECORDS_LIMIT, minimum=1, maximum=MAX_GET_RECORDS_LIMIT
        ),
        min_fetch_interval_s=fetch_interval_ms / 1000,
        max_fetch_calls_per_shard_per_batch=p.integer("maxFetchCallsPerShardPerBatch", 20, minimum=1),
        shard_discovery_interval_s=p.integer("shardDiscoveryIntervalMs", 1000, minimum=0) / 1000,
        kpl_deaggregate=p.boolean("kplDeaggregate", True),
        fail_on_data_loss=p.boolean("failOnDataLoss", True),
        shards_per_task=p.integer("shardsPerTask", 1, minimum=1),
        ship_records_max=p.integer("shipRecordsMax", 200_000, minimum=0),
        consumer_mode=consumer_mode,
        consumer_name=consumer_name,
        require_consumer_deregistration=p.boolean("requireConsumerDeregistration", False),
        lease_table_name=lease_table,
        metadata_table_name=p.text("metadataTableName") or DEFAULT_METADATA_TABLE,
        dynamodb_region=p.text("dynamoDbRegion"),
        dynamodb_endpoint_url=p.text("dynamoDbEndpointUrl"),
        lease_owner=p.text("leaseOwner"),
        lease_failover_s=p.integer("leaseFailoverMs", 10_000, minimum=100) / 1000,
        lease_wait_timeout_s=p.integer("leaseWaitTimeoutMs", 0, minimum=0) / 1000,
    )
    if p.problems:
        raise ConfigError([f"kinesis source: {problem}" for problem in p.problems])
    return options


def parse_sink_options(raw: Mapping[str, str]) -> SinkOptions:
    """The sink's checked options, or :class:`ConfigError` listing every problem."""
    p = _Parser(
        raw, tuple(SINK_OPTION_DOCS), tuple(name for name in OPTION_DOCS if name not in SINK_OPTION_DOCS)
    )
    options = SinkOptions(
        stream_name=p.stream(),
        region=p.text("region"),
        endpoint_url=p.text("endpointUrl"),
        credentials=p.credentials(),
        aggregation_enabled=p.boolean("aggregationEnabled", False),
        aggregation_max_bytes=p.integer(
            "aggregationMaxBytes", DEFAULT_AGGREGATION_MAX_BYTES, minimum=1024, maximum=MAX_AGGREGATION_BYTES
        ),
    )
    if p.problems:
        raise ConfigError([f"kinesis sink: {problem}" for problem in p.problems])
    return options
