"""The Spark source's options: case-insensitive strings in, one frozen (picklable) dataclass out.

Names follow the awslabs and Databricks connectors where they exist. Every problem found is collected
and raised together as one :class:`~kcl_daemon.errors.ConfigError`, so a query with three bad options
fails at start with one message naming all three. Pure: no I/O; credentials never appear in ``repr``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, TypeVar

from kcl_daemon.errors import ConfigError

T = TypeVar("T")

MIN_FETCH_INTERVAL_MS: Final = 200  # 5 GetRecords calls per second per shard, the service's limit
MAX_GET_RECORDS_LIMIT: Final = 10_000


class StartKind(enum.StrEnum):
    TRIM_HORIZON = "TRIM_HORIZON"
    LATEST = "LATEST"
    AT_TIMESTAMP = "AT_TIMESTAMP"
    LEASE_TABLE = "leaseTable"


@dataclass(frozen=True, slots=True)
class StartingPosition:
    kind: StartKind
    timestamp_ms: int | None = None  # AT_TIMESTAMP only


@dataclass(frozen=True, slots=True)
class Credentials:
    access_key_id: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    profile: str | None = None
    provider_chain: str | None = None  # the daemon's AWSCredentialsProvider syntax


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Everything the reader needs, parsed and checked. Seconds as floats inside."""

    stream_name: str
    region: str | None = None
    endpoint_url: str | None = None
    credentials: Credentials = field(default_factory=Credentials)
    starting_position: StartingPosition = StartingPosition(StartKind.LATEST)
    lease_fallback_position: StartingPosition = StartingPosition(StartKind.TRIM_HORIZON)
    max_records_per_batch: int | None = None
    max_records_per_shard_per_batch: int = 100_000
    get_records_limit: int = MAX_GET_RECORDS_LIMIT
    min_fetch_interval_s: float = MIN_FETCH_INTERVAL_MS / 1000
    max_fetch_calls_per_shard_per_batch: int = 20
    shard_discovery_interval_s: float = 1.0
    kpl_deaggregate: bool = True
    fail_on_data_loss: bool = True
    shards_per_task: int = 1
    ship_records_max: int = 200_000  # a batch's probed rows the driver hands to executors (0: never)
    # the lease bridge (None: off)
    lease_table_name: str | None = None
    lease_table_region: str | None = None
    lease_table_endpoint_url: str | None = None
    lease_owner: str | None = None
    lease_failover_s: float = 10.0
    lease_wait_timeout_s: float = 0.0  # 0: refuse to start while other workers hold live leases


#: option name -> (default, meaning): the README's options table is generated from this.
OPTION_DOCS: Final[dict[str, tuple[str, str]]] = {
    "streamName": ("required", "The stream to read."),
    "region": ("boto3's", "AWS region (else `AWS_DEFAULT_REGION` / `~/.aws/config`)."),
    "endpointUrl": ("boto3's", "Kinesis endpoint (emulators, VPC endpoints)."),
    "awsAccessKeyId": ("unset", "Static access key id (with `awsSecretKey`, optional `sessionToken`)."),
    "awsSecretKey": ("unset", "Static secret key; never logged."),
    "sessionToken": ("unset", "Session token of temporary static keys."),
    "profile": ("unset", "A named profile of `~/.aws/config` instead of static keys."),
    "awsCredentialsProvider": (
        "boto3's chain",
        "The daemon's `AWSCredentialsProvider` syntax "
        "(e.g. `STSAssumeRoleSessionCredentialsProvider|arn|name`).",
    ),
    "startingPosition": (
        "`LATEST` (`leaseTable` with `leaseTableName`)",
        "`TRIM_HORIZON`, `LATEST`, `AT_TIMESTAMP:<ISO-8601 with zone>` or `leaseTable` "
        "(the KCL checkpoints). Only for a new query: a restarted one continues from its checkpointLocation.",
    ),
    "leaseTableFallbackPosition": (
        "`TRIM_HORIZON`",
        "Where shards without a lease start (with `leaseTable`).",
    ),
    "maxRecordsPerBatch": ("unset", "Rows per micro-batch (`ReadMaxRows`), split over the readable shards."),
    "maxRecordsPerShardPerBatch": ("100000", "Cap per shard per micro-batch, also under `availableNow`."),
    "getRecordsLimit": ("10000", "`Limit` of each GetRecords call (1..10000)."),
    "minFetchIntervalMs": ("200", "Least time between two GetRecords calls on a shard (≥ 200: 5 calls/s)."),
    "maxFetchCallsPerShardPerBatch": ("20", "GetRecords calls per shard while planning a batch."),
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
    "shardsPerTask": ("1", "Shards read by one Spark task (fewer tasks for streams with many shards)."),
    "shipRecordsMax": (
        "200000",
        "Rows per batch the driver hands to executors from its planning read (0: executors read Kinesis).",
    ),
    "leaseTableName": ("unset", "The KCL lease table (the daemons' `applicationName`): join the fleet."),
    "leaseTableRegion": ("`region`", "Region of the lease table."),
    "leaseTableEndpointUrl": ("boto3's", "DynamoDB endpoint of the lease table."),
    "leaseOwner": ("`spark:<leaseTableName>`", "Worker id the query writes into the leases it holds."),
    "leaseFailoverMs": (
        "10000",
        "The fleet's `failoverTimeMillis`: 3 times the renewal period and liveness window.",
    ),
    "leaseWaitTimeoutMs": (
        "0",
        "How long to wait for running workers to let go of their leases (0: refuse).",
    ),
}
OPTION_NAMES: Final = tuple(OPTION_DOCS)


def markdown_table() -> str:
    """The README's table of the source's options."""
    lines = ["| Option | Default | Meaning |", "|---|---|---|"]
    lines += [f"| `{name}` | {default} | {meaning} |" for name, (default, meaning) in OPTION_DOCS.items()]
    return "\n".join(lines)


_BY_LOWER: Final = {name.lower(): name for name in OPTION_NAMES}


class _Parser:
    def __init__(self, raw: Mapping[str, str]) -> None:
        self.values: dict[str, str] = {}
        self.problems: list[str] = []
        for key, value in raw.items():
            name = _BY_LOWER.get(key.lower())
            if name is None:
                if key.lower() not in _SPARK_OWN:
                    self.problems.append(f"option {key!r} is unknown (known: {', '.join(OPTION_NAMES)})")
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


# Options Spark itself passes to every source (e.g. the path of load()); never ours to refuse.
_SPARK_OWN: Final = frozenset({"path", "paths"})


def parse_options(raw: Mapping[str, str]) -> SourceOptions:
    """The checked options, or :class:`ConfigError` listing every problem (each naming its option)."""
    p = _Parser(raw)
    stream = p.text("streamName")
    if stream is None:
        p.problems.append("option streamName is required")
    access, secret = p.text("awsAccessKeyId"), p.text("awsSecretKey")
    if (access is None) != (secret is None):
        p.problems.append("options awsAccessKeyId and awsSecretKey must be given together")
    credentials = Credentials(
        access_key_id=access,
        secret_key=secret,
        session_token=p.text("sessionToken"),
        profile=p.text("profile"),
        provider_chain=p.text("awsCredentialsProvider"),
    )
    if sum(x is not None for x in (access, credentials.profile, credentials.provider_chain)) > 1:
        p.problems.append("options awsAccessKeyId, profile and awsCredentialsProvider exclude each other")
    lease_table = p.text("leaseTableName")
    default_start = StartKind.LEASE_TABLE if lease_table else StartKind.LATEST
    start = p.position("startingPosition", StartingPosition(default_start), allow_lease=True)
    if start.kind is StartKind.LEASE_TABLE and lease_table is None:
        p.problems.append("option startingPosition=leaseTable needs leaseTableName")
    fetch_interval_ms = p.integer("minFetchIntervalMs", MIN_FETCH_INTERVAL_MS, minimum=MIN_FETCH_INTERVAL_MS)
    options = SourceOptions(
        stream_name=stream or "",
        region=p.text("region"),
        endpoint_url=p.text("endpointUrl"),
        credentials=credentials,
        starting_position=start,
        lease_fallback_position=p.position(
            "leaseTableFallbackPosition", StartingPosition(StartKind.TRIM_HORIZON), allow_lease=False
        ),
        max_records_per_batch=p.optional_integer("maxRecordsPerBatch", minimum=1),
        max_records_per_shard_per_batch=p.integer("maxRecordsPerShardPerBatch", 100_000, minimum=1),
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
        lease_table_name=lease_table,
        lease_table_region=p.text("leaseTableRegion"),
        lease_table_endpoint_url=p.text("leaseTableEndpointUrl"),
        lease_owner=p.text("leaseOwner"),
        lease_failover_s=p.integer("leaseFailoverMs", 10_000, minimum=100) / 1000,
        lease_wait_timeout_s=p.integer("leaseWaitTimeoutMs", 0, minimum=0) / 1000,
    )
    if p.problems:
        raise ConfigError([f"kinesis source: {problem}" for problem in p.problems])
    return options
