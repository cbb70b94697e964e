"""Option names other Kinesis connectors use, resolved onto ours (pure: strings in, strings out).

A query written for the awslabs connector (``kinesis.*`` names) or Databricks' connector moves over by
changing its format name: :func:`resolve` maps every alias onto our option (converting values where the
two spell them differently, e.g. ``kinesis.consumerType=SubscribeToShard`` is ``consumerMode=efo`` and
``minFetchPeriod=400ms`` is ``minFetchIntervalMs=400``), and every option we do not support onto a
problem that names what to use instead: nothing is silently ignored. Names are case-insensitive, as
Spark's options are. The same option given twice under two names with different values is a problem
naming both. :data:`ALIASES` and :data:`UNSUPPORTED` generate the tables of ``docs/spark.md``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

AWSLABS: Final = "awslabs"
DATABRICKS: Final = "Databricks"
EARLIER: Final = "kcl-daemon 0.2"


@dataclass(frozen=True, slots=True)
class Alias:
    """``name`` (as ``source`` spells it) means our option ``target``; ``convert`` maps its value."""

    name: str
    source: str
    target: str
    convert: Callable[[str], str] | None = field(default=None, compare=False)
    note: str = ""


@dataclass(frozen=True, slots=True)
class Unsupported:
    """``name`` (of ``source``) has no equivalent here; ``instead`` says what to use. ``accepted`` values
    are what the option already does here (then it is accepted and has no effect)."""

    name: str
    source: str
    instead: str
    accepted: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Resolved:
    options: dict[str, str]  # our names (as written by the user when not an alias)
    problems: list[str]
    mapped: list[str]  # "alias -> ours" notes, for a log line


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)?\s*$")
_UNIT_MS: Final = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def duration_ms(text: str) -> str:
    """A Spark-style duration (``400ms``, ``1s``, ``2 min``; a bare number is milliseconds) in ms."""
    match = _DURATION.match(text.lower())
    if match is None:
        raise ValueError(f"{text!r} is not a duration such as 400ms, 1s or 2min")
    unit = match.group(2) or "ms"
    factor = _UNIT_MS["ms"] if unit == "ms" else _UNIT_MS[unit[0]]
    return str(round(float(match.group(1)) * factor))


def consumer_type(text: str) -> str:
    """awslabs' ``kinesis.consumerType`` as our ``consumerMode``."""
    lowered = text.strip().lower()
    if lowered == "getrecords":
        return "polling"
    if lowered == "subscribetoshard":
        return "efo"
    raise ValueError(f"{text!r} is not GetRecords or SubscribeToShard")


def awslabs_position(text: str) -> str:
    """awslabs' ``kinesis.startingPosition`` (``AT_TIMESTAMP <ISO-8601>``) in our syntax."""
    stripped = text.strip()
    if stripped.upper().startswith("AT_TIMESTAMP") and not stripped.upper().startswith("AT_TIMESTAMP:"):
        return "AT_TIMESTAMP:" + stripped[len("AT_TIMESTAMP") :].strip()
    return stripped


def databricks_position(text: str) -> str:
    """Databricks' ``initialPosition``: ``latest``, ``trim_horizon``, ``earliest``, or the JSON object
    ``{"at_timestamp": "<time>", "format": "<pattern>"}`` (only ISO-8601 times are read here)."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return stripped.upper()
    try:
        data = json.loads(stripped)
    except ValueError:
        raise ValueError(f"{text!r} is not valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("at_timestamp"), str):
        raise ValueError(f'{text!r} has no "at_timestamp"')
    pattern = data.get("format")
    if pattern is not None and not str(pattern).lower().startswith(("yyyy-mm-dd't'hh", "iso")):
        raise ValueError(
            f"format {pattern!r} is not read here: give at_timestamp as ISO-8601 with a zone and drop "
            '"format" (or use startingPosition=AT_TIMESTAMP:<ISO-8601>)'
        )
    return "AT_TIMESTAMP:" + str(data["at_timestamp"])


def single_stream(text: str) -> str:
    if "," in text:
        raise ValueError(
            "names several streams: one query reads one stream (read each in its own query and "
            "unionByName the frames)"
        )
    return text


ALIASES: Final[tuple[Alias, ...]] = (
    Alias("kinesis.streamName", AWSLABS, "streamName", single_stream),
    Alias("kinesis.region", AWSLABS, "region"),
    Alias("kinesis.kinesisRegion", AWSLABS, "region"),
    Alias("kinesis.endpointUrl", AWSLABS, "endpointUrl"),
    Alias("endpoint", DATABRICKS, "endpointUrl"),
    Alias("kinesis.startingPosition", AWSLABS, "startingPosition", awslabs_position),
    Alias(
        "initialPosition",
        DATABRICKS,
        "startingPosition",
        databricks_position,
        'values latest, trim_horizon, earliest or {"at_timestamp": "<ISO-8601>"}',
    ),
    Alias("kinesis.failOnDataLoss", AWSLABS, "failOnDataLoss", note="awslabs defaults to false, we to true"),
    Alias("kinesis.maxFetchRecordsPerShard", AWSLABS, "maxRecordsPerShardPerBatch"),
    Alias("kinesis.getRecords.numberOfRecordsPerFetch", AWSLABS, "getRecordsLimit"),
    Alias("maxRecordsPerFetch", DATABRICKS, "getRecordsLimit"),
    Alias("kinesis.getRecords.fetchIntervalMs", AWSLABS, "minFetchIntervalMs"),
    Alias("minFetchPeriod", DATABRICKS, "minFetchIntervalMs", duration_ms, "a duration: 400ms"),
    Alias(
        "kinesis.describeShardInterval", AWSLABS, "shardDiscoveryIntervalMs", duration_ms, "a duration: 1s"
    ),
    Alias("shardFetchInterval", DATABRICKS, "shardDiscoveryIntervalMs", duration_ms, "a duration: 1s"),
    Alias("kinesis.awsAccessKeyId", AWSLABS, "awsAccessKeyId"),
    Alias("awsAccessKey", DATABRICKS, "awsAccessKeyId"),
    Alias("kinesis.awsSecretKey", AWSLABS, "awsSecretKey"),
    Alias("kinesis.sessionToken", AWSLABS, "sessionToken"),
    Alias("kinesis.stsRoleArn", AWSLABS, "roleArn"),
    Alias("kinesis.stsSessionName", AWSLABS, "roleSessionName"),
    Alias("kinesis.stsEndpointUrl", AWSLABS, "stsEndpointUrl"),
    Alias("stsEndpoint", DATABRICKS, "stsEndpointUrl"),
    Alias(
        "kinesis.consumerType",
        AWSLABS,
        "consumerMode",
        consumer_type,
        "GetRecords is polling, SubscribeToShard is efo",
    ),
    Alias("kinesis.consumerName", AWSLABS, "consumerName"),
    Alias("kinesis.dynamodb.tableName", AWSLABS, "metadataTableName"),
    Alias("kinesis.sink.aggregationEnabled", AWSLABS, "aggregationEnabled", note="awslabs defaults to true"),
    Alias("leaseTableRegion", EARLIER, "dynamoDbRegion"),
    Alias("leaseTableEndpointUrl", EARLIER, "dynamoDbEndpointUrl"),
)

_RETRIES: Final = "the project's named retry policies (not tunable per query)"
_AWSLABS_UNSUPPORTED: Final[tuple[tuple[str, str], ...]] = (
    ("kinesis.metadataPath", "metadataTableName or leaseTableName (ends are kept in DynamoDB)"),
    ("kinesis.minBatchesToRetain", "nothing: the ends of the last two batches are kept, older ones removed"),
    (
        "kinesis.maxFetchTimePerShardSec",
        "maxRecordsPerShardPerBatch or maxRecordsPerBatch (a read ends at the shard's tip, not after a time)",
    ),
    (
        "kinesis.checkNewRecordThreads",
        "nothing: the planner asks only shards whose last read reached the tip",
    ),
    ("kinesis.metadataNumRetries", _RETRIES),
    ("kinesis.metadataRetryIntervalsMs", _RETRIES),
    ("kinesis.metadataMaxRetryIntervalMs", _RETRIES),
    ("kinesis.clientNumRetries", _RETRIES),
    ("kinesis.clientRetryIntervalsMs", _RETRIES),
    ("kinesis.clientMaxRetryIntervalMs", _RETRIES),
    ("kinesis.subscribeToShard.timeoutSec", "the project's fan-out retry policy"),
    ("kinesis.subscribeToShard.maxRetries", "the project's fan-out retry policy"),
    ("kinesis.credentialProviderClass", "awsCredentialsProvider, or the executors' default credential chain"),
    ("kinesis.credentialProviderParam", "awsCredentialsProvider, or the executors' default credential chain"),
    ("kinesis.sink.flushWaitTimeMs", "nothing: each task sends its rows as it gets them, 500 at a time"),
    (
        "kinesis.sink.recordMaxBufferedTimeMs",
        "nothing: each task sends its rows as it gets them, 500 at a time",
    ),
    ("kinesis.sink.maxConnections", "more partitions (df.repartition(n)): one PutRecords at a time per task"),
    ("proxyAddress", "HTTPS_PROXY in every process's environment (spark.executorEnv.HTTPS_PROXY)"),
    ("proxyPort", "HTTPS_PROXY in every process's environment (spark.executorEnv.HTTPS_PROXY)"),
    ("proxyUsername", "HTTPS_PROXY in every process's environment (spark.executorEnv.HTTPS_PROXY)"),
    ("proxyPassword", "HTTPS_PROXY in every process's environment (spark.executorEnv.HTTPS_PROXY)"),
)
_DATABRICKS_UNSUPPORTED: Final[tuple[tuple[str, str], ...]] = (
    ("maxFetchDuration", "maxRecordsPerShardPerBatch or maxRecordsPerBatch (a read ends at the shard's tip)"),
    (
        "fetchBufferSize",
        "maxBytesPerShardPerBatch (executors read within the batch, nothing is prefetched)",
    ),
    ("maxFetchRate", "minFetchIntervalMs and getRecordsLimit"),
    ("coalesceThresholdBlockSize", "shardsPerTask"),
    ("coalesceBinSize", "shardsPerTask"),
    ("serviceCredential", "awsCredentialsProvider, roleArn, or the executors' default credential chain"),
)
UNSUPPORTED: Final[tuple[Unsupported, ...]] = (
    Unsupported(
        "kinesis.metadataCommitterType",
        AWSLABS,
        "metadataTableName or leaseTableName (ends are kept in DynamoDB; DYNAMODB is accepted)",
        frozenset({"dynamodb"}),
    ),
    Unsupported(
        "kinesis.internal.*", AWSLABS, "nothing: the planner avoids empty batches by asking idle shards"
    ),
    *(Unsupported(name, AWSLABS, instead) for name, instead in _AWSLABS_UNSUPPORTED),
    *(Unsupported(name, DATABRICKS, instead) for name, instead in _DATABRICKS_UNSUPPORTED),
)

_ALIAS_BY_LOWER: Final = {alias.name.lower(): alias for alias in ALIASES}
_UNSUPPORTED_BY_LOWER: Final = {u.name.lower(): u for u in UNSUPPORTED if not u.name.endswith("*")}
_UNSUPPORTED_PREFIXES: Final = tuple((u.name[:-1].lower(), u) for u in UNSUPPORTED if u.name.endswith("*"))


def _unsupported(lowered: str) -> Unsupported | None:
    found = _UNSUPPORTED_BY_LOWER.get(lowered)
    if found is not None:
        return found
    for prefix, entry in _UNSUPPORTED_PREFIXES:
        if lowered.startswith(prefix):
            return entry
    return None


def resolve(raw: Mapping[str, str], canonical: Mapping[str, str]) -> Resolved:
    """Our options from ``raw``: aliases mapped, unsupported options reported.

    ``canonical`` maps each of our option names, lower-cased, to its spelling; keys found there (in any
    case) come out spelled ours, anything else unknown passes through for the caller to report.
    """
    out: dict[str, str] = {}
    given_as: dict[str, str] = {}
    problems: list[str] = []
    mapped: list[str] = []
    for key in sorted(raw, key=str.lower):
        value = str(raw[key])
        lowered = key.lower()
        alias = _ALIAS_BY_LOWER.get(lowered)
        if alias is None:
            skipped = _unsupported(lowered)
            if skipped is not None:
                if value.strip().lower() not in skipped.accepted:
                    problems.append(
                        f"option {key} ({skipped.source}) is not supported: use {skipped.instead}"
                    )
                continue
            target = canonical.get(lowered, key)
        else:
            target = alias.target
            if alias.convert is not None:
                try:
                    value = alias.convert(value)
                except ValueError as exc:
                    problems.append(f"option {key}={raw[key]!r} ({alias.source} name of {target}): {exc}")
                    continue
            mapped.append(f"{key} -> {target}")
        if target in out and out[target].strip() != value.strip():
            problems.append(
                f"options {given_as[target]} and {key} both set {target}, to different values: give one"
            )
            continue
        out[target] = value
        given_as.setdefault(target, key)
    return Resolved(out, problems, mapped)


def markdown_aliases() -> str:
    """The table of accepted aliases for ``docs/spark.md``."""
    by_target: dict[str, dict[str, list[str]]] = {}
    for alias in ALIASES:
        names = by_target.setdefault(alias.target, {}).setdefault(alias.source, [])
        names.append(f"`{alias.name}`" + (f" ({alias.note})" if alias.note else ""))
    lines = [f"| ours | {AWSLABS} | {DATABRICKS} | {EARLIER} |", "|---|---|---|---|"]
    for target in sorted(by_target, key=str.lower):
        cells = [
            ", ".join(by_target[target].get(source, [])) or "—" for source in (AWSLABS, DATABRICKS, EARLIER)
        ]
        lines.append(f"| `{target}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown_unsupported() -> str:
    """The table of options that fail at start, and what to use instead, for ``docs/spark.md``."""
    lines = ["| option | of | use instead |", "|---|---|---|"]
    lines += [f"| `{u.name}` | {u.source} | {u.instead} |" for u in UNSUPPORTED]
    return "\n".join(lines)
