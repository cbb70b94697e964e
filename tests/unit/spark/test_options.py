"""The Spark source's and sink's options: parsing, every problem in one error, the docs tables."""

from __future__ import annotations

import pytest

from kcl_daemon.core.spark.aliases import markdown_aliases, markdown_unsupported
from kcl_daemon.errors import ConfigError
from kcl_daemon.spark.options import (
    DEFAULT_AGGREGATION_MAX_BYTES,
    DEFAULT_MAX_BYTES_PER_SHARD_PER_BATCH,
    DEFAULT_METADATA_TABLE,
    NO_ROW_CAP,
    OPTION_DOCS,
    OPTION_NAMES,
    SINK_OPTION_DOCS,
    ConsumerMode,
    ReadMode,
    StartingPosition,
    StartKind,
    markdown_table,
    parse_options,
    parse_sink_options,
)
from tests.support.paths import REPO

# -- options -----------------------------------------------------------------------------------


def test_options_defaults_and_case_insensitive_names() -> None:
    options = parse_options({"STREAMNAME": "s", "maxrecordsperbatch": "500", "kplDeaggregate": "False"})
    assert options.stream_name == "s"
    assert options.max_records_per_batch == 500
    assert options.kpl_deaggregate is False
    assert options.starting_position == StartingPosition(StartKind.LATEST)
    assert options.min_fetch_interval_s == 0.2 and options.shards_per_task == 1


def test_options_with_a_lease_table_start_from_it_by_default() -> None:
    options = parse_options({"streamName": "s", "leaseTableName": "app"})
    assert options.starting_position.kind is StartKind.LEASE_TABLE


def test_every_bad_option_is_named_in_one_error() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_options(
            {
                "startingPosition": "leaseTable",
                "minFetchIntervalMs": "50",
                "getRecordsLimit": "20000",
                "failOnDataLoss": "maybe",
                "awsAccessKeyId": "AKIA-SECRET-ID",
                "bogus": "1",
            }
        )
    problems = caught.value.problems
    assert len(problems) == 7, problems
    text = " ".join(problems)
    for needle in (
        "streamName is required",
        "leaseTable needs leaseTableName",
        "minFetchIntervalMs=50 must be at least 200",
        "getRecordsLimit=20000",
        "failOnDataLoss='maybe'",
        "awsSecretKey must be given together",
        "'bogus' is unknown",
    ):
        assert needle in text
    assert "AKIA-SECRET-ID" not in text


def test_at_timestamp_needs_a_zone() -> None:
    ok = parse_options({"streamName": "s", "startingPosition": "AT_TIMESTAMP:2026-01-02T03:04:05Z"})
    assert ok.starting_position == StartingPosition(StartKind.AT_TIMESTAMP, 1767323045000)
    with pytest.raises(ConfigError, match="needs a timezone"):
        parse_options({"streamName": "s", "startingPosition": "AT_TIMESTAMP:2026-01-02T03:04:05"})


def test_a_shards_part_of_a_batch_is_bounded_in_bytes_unless_rows_are_capped_too() -> None:
    default = parse_options({"streamName": "s"})
    assert default.max_records_per_shard_per_batch is None and default.per_shard_row_cap == NO_ROW_CAP
    assert default.max_bytes_per_shard_per_batch == DEFAULT_MAX_BYTES_PER_SHARD_PER_BATCH
    both = parse_options(
        {"streamName": "s", "maxRecordsPerShardPerBatch": "500", "maxBytesPerShardPerBatch": "1048576"}
    )
    assert both.per_shard_row_cap == 500 and both.max_bytes_per_shard_per_batch == 1024 * 1024
    with pytest.raises(ConfigError, match="maxBytesPerShardPerBatch=0 must be at least 1"):
        parse_options({"streamName": "s", "maxBytesPerShardPerBatch": "0"})


def test_credentials_never_show_in_repr() -> None:
    options = parse_options({"streamName": "s", "awsAccessKeyId": "AKID", "awsSecretKey": "SECRET"})
    assert "SECRET" not in repr(options) and "AKID" not in repr(options)


def test_docs_options_table_is_generated_from_the_options() -> None:
    page = (REPO / "docs" / "spark.md").read_text(encoding="utf-8")
    start = page.index("<!-- spark-options:start -->\n") + len("<!-- spark-options:start -->\n")
    end = page.index("\n<!-- spark-options:end -->")
    assert page[start:end] == markdown_table(), (
        "regenerate: python -c 'from kcl_daemon.spark.options import *; print(markdown_table())'"
    )
    assert tuple(OPTION_DOCS) == OPTION_NAMES


def test_a_query_written_for_the_awslabs_connector_parses_by_changing_the_format_name() -> None:
    options = parse_options(
        {
            "kinesis.streamName": "orders",
            "kinesis.region": "eu-west-1",
            "kinesis.endpointUrl": "https://kinesis.eu-west-1.amazonaws.com",
            "kinesis.startingPosition": "AT_TIMESTAMP 2026-01-02T03:04:05Z",
            "kinesis.consumerType": "SubscribeToShard",
            "kinesis.consumerName": "orders-app",
            "kinesis.maxFetchRecordsPerShard": "5000",
            "kinesis.getRecords.numberOfRecordsPerFetch": "2000",
            "kinesis.getRecords.fetchIntervalMs": "250",
            "kinesis.describeShardInterval": "5s",
            "kinesis.failOnDataLoss": "false",
            "kinesis.metadataCommitterType": "DYNAMODB",
            "kinesis.dynamodb.tableName": "orders-meta",
            "kinesis.stsRoleArn": "arn:aws:iam::123456789012:role/reader",
            "kinesis.stsSessionName": "spark",
        }
    )
    assert options.stream_name == "orders" and options.region == "eu-west-1"
    assert options.starting_position == StartingPosition(StartKind.AT_TIMESTAMP, 1767323045000)
    assert options.consumer_mode is ConsumerMode.EFO and options.consumer_name == "orders-app"
    assert options.max_records_per_shard_per_batch == 5000 and options.get_records_limit == 2000
    assert options.min_fetch_interval_s == 0.25 and options.shard_discovery_interval_s == 5.0
    assert options.fail_on_data_loss is False and options.metadata_table_name == "orders-meta"
    assert options.credentials.provider_chain == (
        "STSAssumeRoleSessionCredentialsProvider|arn:aws:iam::123456789012:role/reader|spark"
    )


def test_a_query_written_for_databricks_parses_by_its_own_names() -> None:
    options = parse_options(
        {
            "streamName": "orders",
            "region": "us-east-1",
            "endpoint": "http://localhost:4567",
            "initialPosition": "earliest",
            "maxRecordsPerFetch": "500",
            "minFetchPeriod": "400ms",
            "shardFetchInterval": "10s",
            "shardsPerTask": "5",
            "consumerMode": "efo",
            "consumerName": "orders-app",
            "requireConsumerDeregistration": "true",
            "awsAccessKey": "AKID",
            "awsSecretKey": "SECRET",
        }
    )
    assert options.endpoint_url == "http://localhost:4567"
    assert options.starting_position == StartingPosition(StartKind.TRIM_HORIZON)
    assert (options.get_records_limit, options.min_fetch_interval_s, options.shard_discovery_interval_s) == (
        500,
        0.4,
        10.0,
    )
    assert options.shards_per_task == 5 and options.require_consumer_deregistration is True
    assert options.credentials.access_key_id == "AKID"


def test_unsupported_options_fail_at_start_naming_what_to_use_instead() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_options({"streamName": "s", "maxFetchDuration": "10s", "kinesis.metadataPath": "s3://x"})
    text = " ".join(caught.value.problems)
    assert "maxFetchDuration (Databricks) is not supported: use maxRecordsPerShardPerBatch" in text
    assert "kinesis.metadataPath (awslabs) is not supported" in text


def test_enhanced_fan_out_needs_a_consumer_name_and_executor_reads() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_options({"streamName": "s", "consumerMode": "efo", "readMode": "driver"})
    text = " ".join(caught.value.problems)
    assert "consumerMode=efo needs consumerName" in text and "needs readMode=executor" in text


def test_read_mode_and_the_ends_table() -> None:
    assert parse_options({"streamName": "s"}).read_mode is ReadMode.EXECUTOR
    assert parse_options({"streamName": "s"}).ends_table == DEFAULT_METADATA_TABLE
    assert parse_options({"streamName": "s", "leaseTableName": "app"}).ends_table == "app"
    assert parse_options({"streamName": "s", "readMode": "DRIVER"}).read_mode is ReadMode.DRIVER
    with pytest.raises(ConfigError, match="readMode='sideways' is not one of executor, driver"):
        parse_options({"streamName": "s", "readMode": "sideways"})


def test_an_assumed_role_and_its_external_id_never_show_in_repr() -> None:
    options = parse_options(
        {
            "streamName": "s",
            "roleArn": "arn:aws:iam::123456789012:role/r",
            "roleExternalId": "EXTERNAL-SECRET",
            "stsEndpointUrl": "https://sts.eu-west-1.amazonaws.com",
        }
    )
    assert "externalId=EXTERNAL-SECRET" in (options.credentials.provider_chain or "")
    assert "EXTERNAL-SECRET" not in repr(options)
    with pytest.raises(ConfigError, match="roleExternalId needs roleArn"):
        parse_options({"streamName": "s", "roleExternalId": "x"})


def test_the_sink_parses_its_own_options_and_each_side_refuses_the_others() -> None:
    sink = parse_sink_options(
        {"kinesis.streamName": "out", "kinesis.sink.aggregationEnabled": "true", "checkpointLocation": "/c"}
    )
    assert sink.stream_name == "out" and sink.aggregation_enabled is True
    assert sink.aggregation_max_bytes == DEFAULT_AGGREGATION_MAX_BYTES
    with pytest.raises(ConfigError, match="'aggregationEnabled' does not apply here"):
        parse_options({"streamName": "s", "aggregationEnabled": "true"})
    with pytest.raises(ConfigError, match="'startingPosition' does not apply here"):
        parse_sink_options({"streamName": "s", "startingPosition": "LATEST"})
    with pytest.raises(ConfigError, match="aggregationMaxBytes=10 must be at least 1024"):
        parse_sink_options({"streamName": "s", "aggregationMaxBytes": "10"})


def _generated(page: str, marker: str) -> str:
    start = page.index(f"<!-- {marker}:start -->\n") + len(f"<!-- {marker}:start -->\n")
    return page[start : page.index(f"\n<!-- {marker}:end -->")]


def test_docs_tables_are_generated_from_the_code() -> None:
    page = (REPO / "docs" / "spark.md").read_text(encoding="utf-8")
    how = "regenerate: markdown_table(SINK_OPTION_DOCS), markdown_aliases(), markdown_unsupported()"
    assert _generated(page, "spark-sink-options") == markdown_table(SINK_OPTION_DOCS), how
    assert _generated(page, "spark-aliases") == markdown_aliases(), how
    assert _generated(page, "spark-unsupported") == markdown_unsupported(), how
