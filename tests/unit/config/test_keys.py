"""The complete key table: every kind, every Java quirk we decided on, requirements, YAML equivalence."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from kcl_daemon.config import report
from kcl_daemon.config.keys import IGNORED_KEYS, KEYS, KEYS_BY_NAME, Kind, lookup_key
from kcl_daemon.config.settings import (
    REQUIRED_FOR_LEASES,
    REQUIRED_FOR_RUN,
    Settings,
    load_settings,
    parse_value,
    validate_for_leases,
    validate_for_run,
)
from kcl_daemon.core.sequence import Sentinel
from kcl_daemon.errors import ConfigError

ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/orders"


def write(tmp_path: Path, text: str, name: str = "app.properties") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load(tmp_path: Path, text: str, **kwargs: object) -> Settings:
    return load_settings(write(tmp_path, "executableName = x\n" + text), **kwargs)  # type: ignore[arg-type]


# --- every kind: good values -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "raw", "expected"),
    [
        ("applicationName", "  app  ", "app"),
        ("workerId", '"quoted"', '"quoted"'),  # taken literally, quotes included (Java)
        ("executableName", "node   app.js  -x", ("node", "app.js", "-x")),
        ("maxRecords", "500", 500),
        ("maxRecords", "+10000", 10000),
        ("maxLeasesToStealAtOneTime", "0", 0),
        ("childMaxLineBytes", "2048", 2048),
        ("failoverTimeMillis", "2500", 2.5),
        ("taskBackoffTimeMillis", "0", 0.0),
        ("timeoutInSeconds", "1.5", 1.5),
        ("timeoutInSeconds", "2", 2.0),
        ("timeoutInSeconds", "1e1", 10.0),
        *[("cleanupLeasesUponShardCompletion", t, True) for t in ("true", "TRUE", "yes", "y", "on", "1")],
        *[("cleanupLeasesUponShardCompletion", f, False) for f in ("false", "No", "n", "OFF", "0")],
        ("retrievalMode", "polling", "POLLING"),
        ("retrievalMode", "FanOut", "FANOUT"),
        ("metricsLevel", "summary", "SUMMARY"),
        ("metricsEnabledDimensions", "shardid, WorkerIdentifier,ShardId", ("ShardId", "WorkerIdentifier")),
        ("metricsEnabledDimensions", "ALL", ("ALL",)),
        ("initialPositionInStream", "trim_horizon", Sentinel.TRIM_HORIZON),
        ("initialPositionInStream", "LATEST", Sentinel.LATEST),
        ("initialPositionInStreamExtended", "1700000000", datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)),
        ("kinesisEndpoint", "http://localhost:4567", "http://localhost:4567"),
        (
            "dynamoDBEndpoint",
            "https://dynamodb.eu-west-1.amazonaws.com",
            "https://dynamodb.eu-west-1.amazonaws.com",
        ),
        ("streamArn", ARN, ARN),
        ("streamArn", "arn:aws-cn:kinesis:cn-north-1:123456789012:stream/a.b_c-d", None),
        ("AwsCredentialsProvider", "DefaultCredentialsProvider", "DefaultCredentialsProvider"),
        ("leaseClusterSeparator", "_", "_"),
    ],
)
def test_values(key: str, raw: str, expected: object) -> None:
    value = parse_value(KEYS_BY_NAME[key], raw)
    assert value == (raw if expected is None else expected)


# --- every kind: bad values, each an error (Java: a silent 0 or a startup failure) --------------------


@pytest.mark.parametrize(
    ("key", "raw", "message"),
    [
        ("applicationName", "   ", "is empty"),
        ("maxRecords", "ten", "'ten' is not a whole number"),
        ("maxRecords", "1_000", "is not a whole number"),
        ("maxRecords", "1.5", "is not a whole number"),
        ("maxRecords", "0", "below the minimum 1"),
        ("maxRecords", "10001", "above the maximum 10000"),
        ("maxLeasesForWorker", "2147483648", "above the maximum 2147483647"),
        ("failoverTimeMillis", "10s", "is not a whole number of milliseconds"),
        ("failoverTimeMillis", "0", "below the minimum 100"),
        ("failoverTimeMillis", "75", "below the minimum 100"),  # no renewal period (L/3 - 25 ms) left
        ("childMaxLineBytes", "12", "below the minimum 1024"),
        ("timeoutInSeconds", "nan", "is not a number of seconds"),
        ("timeoutInSeconds", "inf", "is not a number of seconds"),
        ("timeoutInSeconds", "0", "below the minimum"),
        ("cleanupLeasesUponShardCompletion", "perhaps", "'perhaps' is not a boolean"),
        ("retrievalMode", "STREAMING", "is not one of DEFAULT, POLLING, FANOUT"),
        ("metricsLevel", "ALL", "is not one of NONE, SUMMARY, DETAILED"),
        ("metricsEnabledDimensions", "ShardId,,StreamId", "has an empty element"),
        ("metricsEnabledDimensions", "Region", "'Region' is not one of"),
        ("initialPositionInStream", "AT_TIMESTAMP", "set initialPositionInStreamExtended"),
        ("initialPositionInStream", "at_timestamp", "set initialPositionInStreamExtended"),
        ("initialPositionInStream", "EARLIEST", "is not one of LATEST, TRIM_HORIZON"),
        ("initialPositionInStreamExtended", "2024-01-01", "is not a whole number of epoch seconds"),
        ("initialPositionInStreamExtended", "-5", "below the minimum 0"),
        ("initialPositionInStreamExtended", "99999999999999999", "out of range"),
        ("kinesisEndpoint", "localhost:4567", "is not a URL with a scheme and host"),
        ("kinesisEndpoint", "ftp://host", "is not a URL"),
        ("dynamoDBEndpoint", "http://", "is not a URL"),
        ("streamArn", "orders", "is not a stream ARN"),
        ("streamArn", "arn:aws:kinesis:us-east-1:1234:stream/orders", "is not a stream ARN"),
        ("streamArn", "arn:aws:sqs:us-east-1:123456789012:stream/orders", "is not a stream ARN"),
        ("AwsCredentialsProvider", "com.example.MyProvider", "unknown credentials provider"),
    ],
)
def test_bad_values(key: str, raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_value(KEYS_BY_NAME[key], raw)


def test_every_kind_is_covered_by_some_key() -> None:
    assert {key.kind for key in KEYS} == set(Kind)


# --- quirks decided on purpose ---------------------------------------------------------------------


def test_explicit_false_and_zero_are_honoured(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        "cleanupLeasesUponShardCompletion = false\nmaxLeasesToStealAtOneTime = 0\n"
        "enablePriorityLeaseAssignment = no\nshutdownGraceMillis = 0\ntaskBackoffTimeMillis=0\n",
    )
    assert settings.cleanup_leases_upon_shard_completion is False
    assert settings.max_leases_to_steal_at_one_time == 0
    assert settings.enable_priority_lease_assignment is False
    assert settings.shutdown_grace_s == 0.0
    assert settings.task_backoff_s == 0.0


def test_defaults() -> None:
    settings = Settings()
    assert settings.initial_position is Sentinel.LATEST
    assert settings.idle_time_between_reads_s == 1.5
    assert settings.failover_s == 10.0
    assert settings.shard_sync_interval_s == 60.0
    assert settings.max_leases_for_worker == 2**31 - 1
    assert settings.shutdown_grace_s == 20.0
    assert settings.worker_id is None
    assert settings.metrics_enabled_dimensions == ("ALL",)
    assert settings.lease_cluster_separator == "-"
    assert settings.effective_lease_assignment_interval_s == 20.0


def test_key_defaults_match_settings_defaults() -> None:
    defaults = Settings()
    for key in KEYS:
        value = getattr(defaults, key.field)
        if key.kind is Kind.MILLIS and key.default is not None:
            assert isinstance(key.default, int)
            assert value == key.default / 1000, key.name
        elif key.kind is Kind.POSITION:
            assert value == Sentinel(str(key.default)), key.name
        else:
            assert value == key.default, key.name


@pytest.mark.parametrize(
    ("raw", "expected"), [("50", 0.2), ("0", 0.2), ("199", 0.2), ("200", 0.2), ("250", 0.25)]
)
def test_idle_time_floor(tmp_path: Path, raw: str, expected: float) -> None:
    settings = load(tmp_path, f"idleTimeBetweenReadsInMillis = {raw}\n")
    assert settings.idle_time_between_reads_s == expected
    raised = [w for w in settings.warnings if "raised to 200" in w]
    assert len(raised) == (1 if int(raw) < 200 else 0)
    if raised:
        assert raised[0].startswith(f"{tmp_path / 'app.properties'}:2: idleTimeBetweenReadsInMillis")


def test_initial_position_extended_sets_at_timestamp(tmp_path: Path) -> None:
    settings = load(tmp_path, "initialPositionInStreamExtended = 1700000000\n")
    assert settings.initial_position is Sentinel.AT_TIMESTAMP
    assert settings.initial_position_timestamp == datetime.fromtimestamp(1700000000, tz=UTC)
    assert settings.warnings == ()
    assert settings.sources["initialPositionInStream"].endswith("(initialPositionInStreamExtended)")


def test_initial_position_extended_wins_with_a_warning(tmp_path: Path) -> None:
    settings = load(tmp_path, "initialPositionInStream = TRIM_HORIZON\ninitialPositionInStreamExtended = 0\n")
    assert settings.initial_position is Sentinel.AT_TIMESTAMP
    assert any("overridden by initialPositionInStreamExtended" in w for w in settings.warnings)


def test_stream_arn_gives_the_stream_name(tmp_path: Path) -> None:
    settings = load(tmp_path, f"streamArn = {ARN}\nstreamName = other\nregionName = eu-west-1\n")
    assert settings.effective_stream_name == "orders"
    assert settings.stream_name == "other"
    assert any("streamName 'other' is ignored" in w for w in settings.warnings)
    assert any("streamArn is in us-east-1 but regionName is eu-west-1" in w for w in settings.warnings)
    assert Settings(stream_name="s").effective_stream_name == "s"
    assert Settings().effective_stream_name is None


def test_lease_table_name() -> None:
    assert Settings(application_name="app").lease_table_name == "app"
    assert Settings(application_name="app", table_name="t").lease_table_name == "t"
    assert Settings().lease_table_name is None


def test_lease_assignment_interval() -> None:
    assert Settings(failover_s=3.0).effective_lease_assignment_interval_s == 6.0
    assert Settings(lease_assignment_interval_s=1.0).effective_lease_assignment_interval_s == 1.0


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        ("", "FANOUT"),  # the kclpy/Node/.NET samples: no polling key, so Java runs enhanced fan-out
        ("idleTimeBetweenReadsInMillis = 250\n", "POLLING"),  # the Ruby sample
        ("maxRecords = 100\n", "POLLING"),
        ("millisBehindLatestThresholdForReducedTps = 10\n", "POLLING"),
        ("retryGetRecordsInSeconds = 5\n", "POLLING"),
        ("maxGetRecordsThreadPool = 2\n", "POLLING"),
        ("retrievalMode = polling\n", "POLLING"),
        ("retrievalMode = FANOUT\nmaxRecords = 100\n", "FANOUT"),
    ],
)
def test_effective_retrieval_mode(tmp_path: Path, text: str, mode: str) -> None:
    assert load(tmp_path, text).effective_retrieval_mode == mode


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        ("workerIdentifier = w1\n", "worker_id", "w1"),
        ("workerId = w1\nworkerIdentifier = w1\n", "worker_id", "w1"),
        ("AWSCredentialsProvider = DefaultAWSCredentialsProviderChain\n", "aws_credentials_provider", None),
        ("awscredentialsprovider = DefaultAWSCredentialsProviderChain\n", "aws_credentials_provider", None),
        (
            "AwsCredentialsProviderDynamoDB = DefaultCredentialsProvider\n",
            "aws_credentials_provider_dynamodb",
            None,
        ),
        (
            "awscredentialsproviderDynamoDB = DefaultCredentialsProvider\n",
            "aws_credentials_provider_dynamodb",
            None,
        ),
        (
            "AWSCredentialsProviderCloudWatch = DefaultCredentialsProvider\n",
            "aws_credentials_provider_cloudwatch",
            None,
        ),
        ("kinesisClient.endpointOverride = http://k:1\n", "kinesis_endpoint", "http://k:1"),
        ("dynamoDbClient.endpointOverride = http://d:1\n", "dynamodb_endpoint", "http://d:1"),
    ],
)
def test_aliases(tmp_path: Path, text: str, field: str, value: str | None) -> None:
    settings = load(tmp_path, text)
    expected = value if value is not None else text.split("=", 1)[1].strip()
    assert getattr(settings, field) == expected
    assert settings.warnings == ()


def test_alias_source_names_the_spelling_used(tmp_path: Path) -> None:
    settings = load(tmp_path, "workerIdentifier = w1\n")
    assert settings.sources["workerId"] == f"{tmp_path / 'app.properties'}:2 (workerIdentifier)"


def test_two_spellings_that_disagree_are_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="workerIdentifier disagrees with workerId"):
        load(tmp_path, "workerId = a\nworkerIdentifier = b\n")


def test_lookup_key() -> None:
    assert lookup_key("AWSCREDENTIALSPROVIDER") is KEYS_BY_NAME["AwsCredentialsProvider"]
    assert lookup_key("failovertimemillis") is None  # only credentials keys ignore case, as in Java
    assert lookup_key("AwsCredentialsProviderKinesis") is None


@pytest.mark.parametrize(
    ("text", "warning"),
    [
        ("failovertimemillis = 5\n", "unknown key 'failovertimemillis' is ignored"),
        ("AwsCredentialsProviderKinesis = x\n", "unknown key 'AwsCredentialsProviderKinesis'"),
        ("fanoutConfig.retryBackoffMillis = 5\n", "nested key 'fanoutConfig.retryBackoffMillis' is ignored"),
        ("kinesisClient.region = us-east-1\n", "nested key 'kinesisClient.region' is ignored"),
        ("timestampAtInitialPositionInStream = 1\n", "use initialPositionInStreamExtended"),
        ("billingMode = PROVISIONED\n", "billingMode is ignored"),
        ("skipShardSyncAtStartupIfLeasesExist = true\n", "skipShardSyncAtWorkerInitializationIfLeasesExist"),
    ],
)
def test_warnings(tmp_path: Path, text: str, warning: str) -> None:
    settings = load(tmp_path, text)
    assert len(settings.warnings) == 1
    assert warning in settings.warnings[0]
    assert settings.warnings[0].startswith(f"{tmp_path / 'app.properties'}:2: ")


@pytest.mark.parametrize("ignored", [key for key in IGNORED_KEYS if not key.warn], ids=lambda k: k.name)
def test_java_keys_we_ignore_are_silent(tmp_path: Path, ignored: object) -> None:
    name = ignored.name  # type: ignore[attr-defined]
    settings = load(tmp_path, f"{name} = 1\n")
    assert settings.warnings == ()
    assert name in settings.ignored


def test_validate_sequence_number_before_checkpointing_is_accepted(tmp_path: Path) -> None:
    settings = load(tmp_path, "validateSequenceNumberBeforeCheckpointing = false\n")
    assert settings.validate_sequence_number_before_checkpointing is False
    assert settings.warnings == ()


def test_credentials_notes_become_warnings(tmp_path: Path) -> None:
    settings = load(tmp_path, "AwsCredentialsProvider = SystemPropertyCredentialsProvider\n")
    assert any("no Java system properties" in w for w in settings.warnings)


def test_bad_credentials_provider_names_key_and_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, "AWSCredentialsProvider = com.example.Mine\n")
    (problem,) = info.value.problems
    assert problem.startswith(f"{tmp_path / 'app.properties'}:2: AWSCredentialsProvider names an unknown")


# --- what a command needs ---------------------------------------------------------------------------


def test_run_requirements_all_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, "maxRecords = ten\nfailoverTimeMillis = soon\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path, required=REQUIRED_FOR_RUN)
    assert info.value.problems == (
        f"{path}:1: maxRecords 'ten' is not a whole number",
        f"{path}:2: failoverTimeMillis 'soon' is not a whole number of milliseconds",
        f"{path}: required key executableName is missing",
        f"{path}: required key applicationName is missing",
        f"{path}: one of streamName or streamArn or streamNames is required",
    )


def test_an_invalid_required_key_is_reported_once(tmp_path: Path) -> None:
    path = write(tmp_path, "executableName = x\napplicationName = app\nstreamArn = nope\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path, required=REQUIRED_FOR_RUN)
    assert len(info.value.problems) == 1
    assert "streamArn 'nope' is not a stream ARN" in info.value.problems[0]


def test_leases_needs_only_a_table(tmp_path: Path) -> None:
    assert (
        load_settings(write(tmp_path, "tableName = tab\n"), required=REQUIRED_FOR_LEASES).lease_table_name
        == "tab"
    )
    with pytest.raises(ConfigError, match="one of applicationName or tableName is required"):
        load_settings(write(tmp_path, "streamName = s\n"), required=REQUIRED_FOR_LEASES)


def test_validate_functions() -> None:
    assert validate_for_run(Settings()) == [
        "required key executableName is missing",
        "required key applicationName is missing",
        "one of streamName or streamArn or streamNames is required",
    ]
    assert validate_for_run(Settings(executable=("x",), application_name="a", stream_arn=ARN)) == []
    assert validate_for_leases(Settings()) == ["one of applicationName or tableName is required"]
    assert validate_for_leases(Settings(table_name="t")) == []


# --- YAML is the same configuration -----------------------------------------------------------------

PROPERTIES = f"""\
executableName = python3 app.py
applicationName = app
streamArn = {ARN}
workerIdentifier = w1
AWSCredentialsProvider = ProfileCredentialsProvider|dev
failoverTimeMillis = 20000
cleanupLeasesUponShardCompletion = false
metricsEnabledDimensions = ShardId,StreamId
initialPositionInStream = TRIM_HORIZON
timeoutInSeconds = 2.5
kinesisClient.endpointOverride = http://localhost:4567
maxActiveThreads = 4
"""

YAML = f"""\
executableName: python3 app.py
applicationName: app
streamArn: {ARN}
workerIdentifier: w1
AWSCredentialsProvider: ProfileCredentialsProvider|dev
failoverTimeMillis: 20000
cleanupLeasesUponShardCompletion: false
metricsEnabledDimensions: [ShardId, StreamId]
initialPositionInStream: TRIM_HORIZON
timeoutInSeconds: 2.5
kinesisClient:
  endpointOverride: http://localhost:4567
maxActiveThreads: 4
"""


def test_yaml_equals_properties(tmp_path: Path) -> None:
    from_properties = load_settings(write(tmp_path, PROPERTIES))
    from_yaml = load_settings(write(tmp_path, YAML, name="app.yaml"))
    assert from_yaml == from_properties.__class__(
        **{
            **{f: getattr(from_properties, f) for f in Settings.__dataclass_fields__},
            "sources": from_yaml.sources,
            "ignored": from_yaml.ignored,
        }
    )
    # the same lines, only the file name differs
    for name, where in from_properties.sources.items():
        if name == "kinesisEndpoint":  # a nested YAML mapping takes two lines
            continue
        assert from_yaml.sources[name] == where.replace("app.properties", "app.yaml"), name
    assert from_yaml.ignored == {"maxActiveThreads": ("4", f"{tmp_path / 'app.yaml'}:13")}
    assert from_yaml.kinesis_endpoint == "http://localhost:4567"
    assert (
        from_yaml.sources["kinesisEndpoint"] == f"{tmp_path / 'app.yaml'}:12 (kinesisClient.endpointOverride)"
    )


def test_empty_yaml_is_all_defaults(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path, "", name="app.yml"), required=()) == Settings(
        sources={key.name: "default" for key in KEYS}
    )


def _renewal(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "app.properties"
    path.write_text("executableName = /bin/true\napplicationName = app\nstreamName = s\n" + text)
    return load_settings(path)


def test_lease_renewal_defaults_to_per_lease_and_check_config_lists_it(tmp_path: Path) -> None:
    settings = _renewal(tmp_path, "")
    assert settings.lease_renewal == "PER_LEASE"
    listed = {row.key: row for row in report.rows(settings)}
    assert listed["leaseRenewal"].value == "PER_LEASE"
    two_x = "clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1\n"
    assert _renewal(tmp_path, two_x + "leaseRenewal = per_worker\n").lease_renewal == "PER_WORKER"
    # the 3.x lease mode (the default) takes it too: followers heartbeat, the leader reads the heartbeats
    assert _renewal(tmp_path, "leaseRenewal = PER_WORKER\n").lease_renewal == "PER_WORKER"


def test_lease_renewal_problems_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _renewal(tmp_path, "leaseRenewal = SOMETIMES\n")
    assert any("leaseRenewal" in p for p in caught.value.problems), caught.value.problems
