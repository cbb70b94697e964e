"""Load a properties (or YAML) file into typed :class:`Settings`, reporting every problem at once.

Differences from Java, on purpose (the README lists them all):

* an explicit ``false`` or ``0`` is honoured (Java ignores both for primitive keys);
* a value that does not parse, or is out of range, is an error naming the key and line (Java silently
  uses 0, which then means "the default");
* leading and trailing whitespace around a value is trimmed, and enum-like values match
  case-insensitively;
* unknown keys, legacy KCL 1.x keys and nested bean paths we do not support are warnings (Java is
  silent), never errors, so files written for the Java daemon keep working;
* two spellings of one key (``workerId`` and ``workerIdentifier``) with different values are an error.

What a command needs (``run``: executableName, applicationName, streamName or streamArn) is checked by
:func:`load_settings` ``required=`` together with the parse errors, or afterwards by
:func:`validate_for_run` / :func:`validate_for_leases`.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import yaml

from kcl_daemon.config import slices
from kcl_daemon.config.keys import IGNORED_BY_NAME, KEYS, Key, Kind, lookup_key
from kcl_daemon.config.properties import PropertiesSyntaxError, parse_properties
from kcl_daemon.config.providers import parse_providers
from kcl_daemon.config.secrets import mask_url_password
from kcl_daemon.config.validate import check_values
from kcl_daemon.core.leader.leader_lock import check_period_s
from kcl_daemon.core.leases.expiry import expiry_interval_for
from kcl_daemon.core.leases.timings import assignment_interval_for
from kcl_daemon.core.sequence import Sentinel
from kcl_daemon.errors import ConfigError
from kcl_daemon.retry import LEASE_IO

_TRUE = {"true", "yes", "y", "on", "1"}
_FALSE = {"false", "no", "n", "off", "0"}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_JAVA_INT_MAX = 2**31 - 1
STREAM_ARN_PATTERN: Final = re.compile(
    r"arn:aws[^:]*:kinesis:(?P<region>[a-z0-9-]+):(?P<account>[0-9]{12}):stream/(?P<name>[a-zA-Z0-9_.-]+)"
)
#: keys whose presence makes retrievalMode=DEFAULT choose polling (contract §2.6)
POLLING_KEYS: Final = (
    "maxRecords",
    "idleTimeBetweenReadsInMillis",
    "millisBehindLatestThresholdForReducedTps",
    "retryGetRecordsInSeconds",
    "maxGetRecordsThreadPool",
)

#: a requirement is a key, or a tuple of keys of which one is enough
Requirement = str | tuple[str, ...]
REQUIRED_FOR_REPLAY: Final[tuple[Requirement, ...]] = ("executableName",)
REQUIRED_FOR_RUN: Final[tuple[Requirement, ...]] = (
    "executableName",
    "applicationName",
    ("streamName", "streamArn", "streamNames"),
)
REQUIRED_FOR_LEASES: Final[tuple[Requirement, ...]] = (("applicationName", "tableName"),)


@dataclass(frozen=True, slots=True)
class Settings:
    # daemon and identity
    executable: tuple[str, ...] | None = None
    application_name: str | None = None
    stream_name: str | None = None
    stream_arn: str | None = None
    stream_names: str | None = None  # raw list; kcl_daemon.core.shards.multi_stream.parse_stream_list
    former_streams_leases_deletion_wait_s: float = 3600.0
    worker_id: str | None = None  # None: generate one at run time
    table_name: str | None = None
    processing_language: str | None = None
    action_timeout_s: float | None = None
    shutdown_grace_s: float = 20.0
    validate_sequence_number_before_checkpointing: bool = True  # accepted, ignored
    # AWS clients: raw provider values (kcl_daemon.config.providers parses them); None = boto3 defaults
    aws_credentials_provider: str | None = None
    aws_credentials_provider_dynamodb: str | None = None
    aws_credentials_provider_cloudwatch: str | None = None
    region_name: str | None = None
    kinesis_endpoint: str | None = None
    dynamodb_endpoint: str | None = None
    # retrieval
    retrieval_mode: str = "DEFAULT"
    fanout_consumer_name: str | None = None
    fanout_consumer_arn: str | None = None
    max_records: int = 10000
    idle_time_between_reads_s: float = 1.5
    millis_behind_latest_threshold_for_reduced_tps_s: float = 0.0
    initial_position: Sentinel = Sentinel.LATEST
    initial_position_timestamp: datetime | None = None
    call_process_records_even_for_empty_record_list: bool = False
    # lease management
    failover_s: float = 10.0
    lease_renewal: str = "PER_LEASE"
    shard_sync_interval_s: float = 60.0
    cleanup_leases_upon_shard_completion: bool = True
    ignore_unexpected_child_shards: bool = False
    max_leases_for_worker: int = 2**31 - 1
    max_leases_to_steal_at_one_time: int = 1
    max_lease_renewal_threads: int = 20
    list_shards_backoff_s: float = 1.5
    max_list_shards_retry_attempts: int = 50
    enable_priority_lease_assignment: bool = True
    lease_assignment_interval_s: float | None = None  # None: 2 x failover_s
    lease_expiry_check_interval_s: float | None = None  # None: min(1 s, failover_s / 10)
    # coordinator, lifecycle, metrics
    parent_shard_poll_interval_s: float = 10.0
    skip_shard_sync_at_worker_initialization_if_leases_exist: bool = False
    task_backoff_s: float = 0.5
    metrics_level: str = "DETAILED"
    metrics_enabled_dimensions: tuple[str, ...] = ("ALL",)
    metrics_buffer_time_s: float = 10.0
    metrics_max_queue_size: int = 10000
    # kcl-daemon's own
    lease_cluster_separator: str = "-"
    cloudwatch_endpoint: str | None = None
    child_channel: bool = True
    shards_per_child: int = 1
    worker_zone: str | None = None
    zone_from_environment: bool = False
    restart_grace_s: float = 0.0
    max_handoffs_per_worker: int = 2
    initialize_timeout_s: float | None = None
    process_records_timeout_s: float | None = None
    shutdown_timeout_s: float | None = None
    child_write_timeout_s: float = 30.0
    child_stop_timeout_s: float = 5.0
    child_max_line_bytes: int = 1024 * 1024
    child_restart_backoff_s: float = 1.0
    child_restart_max_backoff_s: float = 60.0
    child_max_consecutive_failures: int = 5
    child_stall_warning_s: float = 60.0
    shard_stall_s: float = 300.0
    poison_record_policy: str = "RETRY"
    max_delivery_attempts: int = 3
    dead_letter_destination: str | None = None
    # KCL 3.x lease assignment
    client_version_config: str = "CLIENT_VERSION_CONFIG_3X"
    lease_assignment_strategy: str = "COOPERATIVE"
    graceful_lease_handoff_timeout_s: float = 30.0
    graceful_lease_handoff: bool = True
    worker_metrics_capture_s: float = 1.0
    worker_metrics_report_s: float = 30.0
    worker_metrics_history: int = 10
    disable_worker_metrics: bool = False
    dampening_percent: int = 60
    rebalance_threshold_percent: int = 10
    allow_throughput_overshoot: bool = True
    variance_balancing_frequency: int = 3
    worker_metrics_table_name: str | None = None
    coordinator_state_table_name: str | None = None
    # KCL 3.5
    lease_table_layout: str | None = None  # None: SINGLE_TABLE, or the side tables while 2.x is about
    migrate_all_entities_to_lease_table: bool = False
    table_migration_complete_bake_s: float = 86400.0
    table_migration_init_bake_s: float = 3600.0
    lease_table_scan_total_segments: int = 0
    leader_lock_duration_s: float | None = None  # None: failover_s
    leader_lock_heartbeat_s: float | None = None  # None: a quarter of the lock duration
    #: key -> where its value came from: "app.properties:12", "default", or with the alias used,
    #: "app.properties:3 (workerIdentifier)"
    sources: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    #: accepted-but-ignored Java keys that were set: key -> (raw value, where)
    ignored: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def effective_stream_name(self) -> str | None:
        """The stream to read: the name inside streamArn when it is set (as Java), else streamName."""
        if self.stream_arn is not None:
            match = STREAM_ARN_PATTERN.fullmatch(self.stream_arn)
            if match:
                return match["name"]
        return self.stream_name

    @property
    def lease_table_name(self) -> str | None:
        return self.table_name or self.application_name

    @property
    def effective_lease_expiry_check_s(self) -> float:
        if self.lease_expiry_check_interval_s is not None:
            return self.lease_expiry_check_interval_s
        return expiry_interval_for(self.failover_s)

    @property
    def effective_lease_assignment_interval_s(self) -> float:
        if self.lease_assignment_interval_s is not None:
            return self.lease_assignment_interval_s
        return assignment_interval_for(self.failover_s)

    @property
    def effective_leader_lock_duration_s(self) -> float:
        return self.leader_lock_duration_s if self.leader_lock_duration_s is not None else self.failover_s

    @property
    def effective_leader_lock_heartbeat_s(self) -> float:
        if self.leader_lock_heartbeat_s is not None:
            return self.leader_lock_heartbeat_s
        return check_period_s(self.effective_leader_lock_duration_s)

    @property
    def effective_retrieval_mode(self) -> str:
        """POLLING or FANOUT. DEFAULT means polling when any polling key is set, else fan-out (Java)."""
        if self.retrieval_mode != "DEFAULT":
            return self.retrieval_mode
        set_keys = {name for name, where in self.sources.items() if where != "default"} | set(self.ignored)
        return "POLLING" if set_keys.intersection(POLLING_KEYS) else "FANOUT"

    # Each concern's slice (kcl_daemon.config.slices): a package takes its slice, not the whole Settings.

    def tables(self) -> slices.TableNames | None:
        """The lease table and the side tables' names; None without applicationName or tableName."""
        return slices.table_names(self)

    def leases(self) -> slices.LeaseSlice:
        return slices.lease_slice(self)

    def shards(self) -> slices.ShardSlice:
        return slices.shard_slice(self)

    def retrieval(self) -> slices.RetrievalSlice:
        return slices.retrieval_slice(self)

    def consumer(self) -> slices.ConsumerSlice:
        return slices.consumer_slice(self)

    def leader(self) -> slices.LeaderSlice:
        return slices.leader_slice(self)

    def metrics(self) -> slices.MetricsSlice:
        return slices.metrics_slice(self)

    def worker(self) -> slices.WorkerSlice:
        return slices.worker_slice(self)


def parse_value(key: Key, raw: str, warnings: list[str] | None = None) -> object:
    """Parse one value for ``key``; raise :class:`ValueError` saying what is wrong (without the key)."""
    text = raw.strip()
    if not text:
        raise ValueError("is empty")
    match key.kind:
        case Kind.STRING:
            return text
        case Kind.ARGV:
            return tuple(part for part in text.split(" ") if part)
        case Kind.BOOL:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError(f"{text!r} is not a boolean (true/false)")
        case Kind.INT | Kind.BYTES | Kind.MILLIS | Kind.EPOCH_SECONDS:
            if not _INTEGER.fullmatch(text):
                unit = "" if key.kind is Kind.INT else f" of {key.kind.value}"
                raise ValueError(f"{text!r} is not a whole number{unit}")
            number = int(text)
            _check_range(key, number)
            if key.floor is not None and number < key.floor:
                if warnings is not None:
                    warnings.append(f"{number} is below {key.floor:g} and is raised to {key.floor:g}")
                number = int(key.floor)
            if key.kind is Kind.MILLIS:
                return number / 1000
            if key.kind is Kind.EPOCH_SECONDS:
                try:
                    return datetime.fromtimestamp(number, tz=UTC)
                except (OverflowError, OSError, ValueError):
                    raise ValueError(f"{number} is out of range for a timestamp") from None
            return number
        case Kind.SECONDS:
            if not _DECIMAL.fullmatch(text):
                raise ValueError(f"{text!r} is not a number of seconds")
            seconds = float(text)
            _check_range(key, seconds)
            return seconds
        case Kind.CHOICE:
            return _choice(key, text)
        case Kind.NAMES:
            names = [part.strip() for part in text.split(",")]
            if not all(names):
                raise ValueError(f"{text!r} has an empty element")
            return tuple(dict.fromkeys(_choice(key, name) for name in names))
        case Kind.POSITION:
            if text.upper() == Sentinel.AT_TIMESTAMP:
                raise ValueError(
                    "AT_TIMESTAMP needs a timestamp: set initialPositionInStreamExtended (epoch seconds) "
                    "instead, as with the Java daemon"
                )
            return Sentinel(_choice(key, text))
        case Kind.URL:
            parts = urlsplit(text)
            shown = mask_url_password(text)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{shown!r} is not a URL with a scheme and host (e.g. https://host:port)")
            try:
                port = parts.port
            except ValueError:
                raise ValueError(f"{shown!r} has a port outside 1..65535") from None
            if port == 0:
                raise ValueError(f"{shown!r} has a port outside 1..65535")
            return text
        case Kind.STREAM_ARN:
            if not STREAM_ARN_PATTERN.fullmatch(text):
                raise ValueError(f"{text!r} is not a stream ARN (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME)")
            return text
        case Kind.CREDENTIALS:
            parsed = parse_providers(text)
            if warnings is not None:
                warnings.extend(parsed.notes)
            return text
    raise AssertionError(key.kind)  # pragma: no cover


def _choice(key: Key, text: str) -> str:
    for choice in key.choices:
        if choice.upper() == text.upper():
            return choice
    raise ValueError(f"{text!r} is not one of {', '.join(key.choices)}")


def _check_range(key: Key, value: float) -> None:
    maximum = key.maximum
    if maximum is None and key.kind is Kind.INT:
        maximum = _JAVA_INT_MAX
    if key.minimum is not None and value < key.minimum:
        raise ValueError(f"{_number(value)} is below the minimum {_number(key.minimum)}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{_number(value)} is above the maximum {_number(maximum)}")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _yaml_lines(text: str, source: str = "<yaml>", warnings: list[str] | None = None) -> dict[str, int]:
    """Flattened YAML key -> 1-based line number; a key set twice is warned about with both lines."""
    lines: dict[str, int] = {}

    def walk(node: yaml.Node, prefix: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                name = f"{prefix}{key_node.value}"
                line = key_node.start_mark.line + 1
                if name in lines and warnings is not None:
                    again = f"{name} is set again (also on line {lines[name]}); the last value wins"
                    warnings.append(f"{source}:{line}: {again}")
                lines[name] = line
                walk(value_node, f"{name}.")

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is not None:
        walk(root, "")
    return lines


def _yaml_scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, list):
        return ",".join(_yaml_scalar(v) for v in value)
    return str(value)


def _flatten(mapping: Mapping[object, object], prefix: str, out: dict[str, str]) -> None:
    for k, v in mapping.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping):
            _flatten(v, f"{name}.", out)
        else:
            out[name] = _yaml_scalar(v)


def _read_raw(path: Path, warnings: list[str]) -> dict[str, tuple[str, str]]:
    """key -> (raw value, where) from a .properties or YAML file; duplicate keys are warned about."""
    try:
        text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the configuration file: {exc.strerror or exc}"]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"]) from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
            if root is not None:
                refuse_alias_bombs(root, str(path))
            loaded = yaml.safe_load(text)
            lines = _yaml_lines(text, str(path), warnings)
        except yaml.YAMLError as exc:
            raise ConfigError([f"{path}: invalid YAML: {exc}"]) from None
        if loaded is None:
            return {}
        if not isinstance(loaded, dict):
            raise ConfigError([f"{path}: the YAML document must be a mapping of key: value"])
        flat: dict[str, str] = {}
        _flatten(loaded, "", flat)
        return {k: (v, f"{path}:{lines[k]}" if k in lines else str(path)) for k, v in flat.items()}
    try:
        entries = parse_properties(text, source=str(path))
    except PropertiesSyntaxError as exc:
        raise ConfigError(exc.problems) from None
    for key, entry in entries.items():
        if entry.earlier_lines:
            earlier = ", ".join(str(line) for line in entry.earlier_lines)
            warnings.append(
                f"{path}:{entry.line}: {key} is set again (also on line {earlier}); the last value wins"
            )
    return {k: (e.value, f"{path}:{e.line}") for k, e in entries.items()}


#: YAML nodes a configuration may expand to through aliases; far beyond any real configuration.
YAML_NODE_BUDGET: Final = 10_000


def refuse_alias_bombs(root: yaml.Node, source: str) -> None:
    """Raise :class:`ConfigError` for aliases that recurse or expand past :data:`YAML_NODE_BUDGET`."""
    seen = 0
    stack: list[tuple[yaml.Node, frozenset[int]]] = [(root, frozenset())]
    while stack:
        node, path = stack.pop()
        seen += 1
        if seen > YAML_NODE_BUDGET:
            raise ConfigError(
                [f"{source}: YAML aliases expand to more than {YAML_NODE_BUDGET} values; refusing the file"]
            )
        if id(node) in path:
            line = node.start_mark.line + 1
            raise ConfigError([f"{source}:{line}: a YAML alias refers to itself (a recursive structure)"])
        inner = path | {id(node)}
        if isinstance(node, yaml.MappingNode):
            stack.extend((child, inner) for pair in node.value for child in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, inner) for child in node.value)


def _missing(requirements: Sequence[Requirement], present: set[str]) -> list[str]:
    problems: list[str] = []
    for requirement in requirements:
        names = (requirement,) if isinstance(requirement, str) else requirement
        if not present.intersection(names):
            if len(names) == 1:
                problems.append(f"required key {names[0]} is missing")
            else:
                problems.append(f"one of {' or '.join(names)} is required")
    return problems


def _present_fields(settings: Settings) -> set[str]:
    return {key.name for key in KEYS if getattr(settings, key.field) is not None}


def validate_for_run(settings: Settings) -> list[str]:
    """What ``run`` needs beyond a parseable file; an empty list when nothing is missing."""
    return _missing(REQUIRED_FOR_RUN, _present_fields(settings))


def validate_for_leases(settings: Settings) -> list[str]:
    """What ``leases`` needs: a lease table name (tableName or applicationName)."""
    return _missing(REQUIRED_FOR_LEASES, _present_fields(settings))


def load_settings(
    path: Path, *, required: Sequence[Requirement] = REQUIRED_FOR_REPLAY, now: datetime | None = None
) -> Settings:
    """Read ``path`` and return its settings; raise :class:`ConfigError` listing every problem.

    ``required``: keys the caller's command needs (:data:`REQUIRED_FOR_RUN`, ...); a tuple inside
    means "one of these". Missing keys are reported together with every other problem.
    """
    warnings: list[str] = []
    raw = _read_raw(path, warnings)
    problems: list[str] = []
    values: dict[str, object] = {}
    set_by: dict[str, tuple[str, str, object]] = {}  # field -> (name, where, value)
    sources: dict[str, str] = {key.name: "default" for key in KEYS}
    ignored: dict[str, tuple[str, str]] = {}
    present: set[str] = set()
    for name, (value, where) in raw.items():
        key = lookup_key(name)
        if key is None:
            _unknown(name, value, where, ignored, warnings)
            continue
        present.add(key.name)
        notes: list[str] = []
        try:
            parsed = parse_value(key, value, notes)
        except ValueError as exc:
            problems.append(f"{where}: {name} {exc}")
            continue
        warnings.extend(f"{where}: {name}: {note}" for note in notes)
        earlier = set_by.get(key.field)
        if earlier is not None and earlier[2] != parsed:
            problems.append(
                f"{where}: {name} disagrees with {earlier[0]} ({earlier[1]}); they are one key, keep one"
            )
            continue
        set_by[key.field] = (name, where, parsed)
        values[key.field] = parsed
        sources[key.name] = where if name == key.name else f"{where} ({name})"
    problems.extend(f"{path}: {problem}" for problem in _missing(required, present))
    found, noted = check_values(values, sources, now=now or datetime.now(tz=UTC))
    problems.extend(found)
    warnings.extend(noted)
    if problems:
        raise ConfigError(problems, warnings)
    _cross_check(values, sources, warnings)
    settings = Settings(**values)  # type: ignore[arg-type]
    return dataclasses.replace(settings, sources=sources, warnings=tuple(warnings), ignored=ignored)


def _unknown(
    name: str, value: str, where: str, ignored: dict[str, tuple[str, str]], warnings: list[str]
) -> None:
    known = IGNORED_BY_NAME.get(name)
    if known is not None:
        ignored[name] = (value, where)
        if known.warn:
            warnings.append(f"{where}: {name} is ignored: {known.reason}")
    elif name.lower().startswith("awscredentialsprovider"):
        warnings.append(
            f"{where}: unknown key {name!r} is ignored "
            "(AwsCredentialsProvider, AwsCredentialsProviderDynamoDB, AwsCredentialsProviderCloudWatch)"
        )
    elif "." in name:
        warnings.append(
            f"{where}: nested key {name!r} is ignored (kcl-daemon supports kinesisClient.endpointOverride, "
            "dynamoDbClient.endpointOverride, fanoutConfig.consumerName and fanoutConfig.consumerArn)"
        )
    else:
        warnings.append(f"{where}: unknown key {name!r} is ignored{_suggestion(name)}")


def _suggestion(name: str) -> str:
    """ " - did you mean `failoverTimeMillis`?" for a near miss of a known key, else ""."""
    known = [n for key in KEYS for n in key.names] + list(IGNORED_BY_NAME)
    by_lower = {n.lower(): n for n in known}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.8)
    return f" - did you mean {by_lower[close[0]]!r}?" if close else ""


def _cross_check(values: dict[str, object], sources: dict[str, str], warnings: list[str]) -> None:
    """Relations between keys that are worth a warning; also derives initial_position AT_TIMESTAMP."""
    if values.get("initial_position_timestamp") is not None:
        if "initial_position" in values:
            warnings.append(
                f"{sources['initialPositionInStream']}: initialPositionInStream is overridden by "
                f"initialPositionInStreamExtended ({sources['initialPositionInStreamExtended']})"
            )
        values["initial_position"] = Sentinel.AT_TIMESTAMP
        sources["initialPositionInStream"] = (
            f"{sources['initialPositionInStreamExtended']} (initialPositionInStreamExtended)"
        )
    arn = values.get("stream_arn")
    if isinstance(arn, str):
        match = STREAM_ARN_PATTERN.fullmatch(arn)
        assert match is not None
        name = values.get("stream_name")
        if name is not None and name != match["name"]:
            warnings.append(
                f"{sources['streamName']}: streamName {name!r} is ignored: streamArn "
                f"({sources['streamArn']}) names stream {match['name']!r}"
            )
        region = values.get("region_name")
        if region is not None and region != match["region"]:
            warnings.append(
                f"{sources['streamArn']}: streamArn is in {match['region']} but regionName is {region}; "
                "as with the Java daemon only the stream name is used and the clients use regionName"
            )


def graceful_stop_budget_s(settings: Settings) -> float:
    """The longest a graceful stop (SIGTERM) takes: the processors' ``shutdownGraceMillis``, then each
    child stopped harder (EOF, SIGTERM: ``childStopTimeoutMillis`` each), then the leader lock, the
    worker-metrics item and the leases released (a few lease-table calls, each bounded by the ``LEASE_IO``
    deadline). A supervisor's kill timeout (``terminationGracePeriodSeconds``, ECS ``stopTimeout``, systemd
    ``TimeoutStopSec``) must be longer, or the stop ends in a SIGKILL and the leases expire instead of
    being handed over."""
    return settings.shutdown_grace_s + 2 * settings.child_stop_timeout_s + 3 * LEASE_IO.deadline_s
