"""Other connectors' option names resolved onto ours: tables of names and values, conflicts, refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.spark.aliases import (
    ALIASES,
    UNSUPPORTED,
    consumer_type,
    databricks_position,
    duration_ms,
    resolve,
)

OURS = {name.lower(): name for name in ("streamName", "region", "consumerMode", "startingPosition")}


@pytest.mark.parametrize(
    ("given_options", "expected"),
    [
        (
            {"kinesis.streamName": "s", "kinesis.region": "eu-west-1"},
            {"streamName": "s", "region": "eu-west-1"},
        ),
        ({"KINESIS.KINESISREGION": "eu-west-1"}, {"region": "eu-west-1"}),  # case-insensitive
        ({"kinesis.consumerType": "SubscribeToShard"}, {"consumerMode": "efo"}),
        ({"kinesis.consumerType": "getrecords"}, {"consumerMode": "polling"}),
        (
            {"kinesis.startingPosition": "AT_TIMESTAMP 2023-08-30T19:00:05Z"},
            {"startingPosition": "AT_TIMESTAMP:2023-08-30T19:00:05Z"},
        ),
        ({"kinesis.startingPosition": "EARLIEST"}, {"startingPosition": "EARLIEST"}),
        ({"initialPosition": "trim_horizon"}, {"startingPosition": "TRIM_HORIZON"}),
        (
            {"initialPosition": '{"at_timestamp": "2023-08-30T19:00:05+02:00"}'},
            {"startingPosition": "AT_TIMESTAMP:2023-08-30T19:00:05+02:00"},
        ),
        ({"minFetchPeriod": "400ms"}, {"minFetchIntervalMs": "400"}),
        (
            {"shardFetchInterval": "2s", "kinesis.describeShardInterval": "2000"},
            {"shardDiscoveryIntervalMs": "2000"},
        ),
        ({"kinesis.metadataCommitterType": "DYNAMODB"}, {}),  # what we do anyway: accepted
        ({"leaseTableEndpointUrl": "http://x"}, {"dynamoDbEndpointUrl": "http://x"}),  # our old name
        ({"streamName": "s", "path": "p"}, {"streamName": "s", "path": "p"}),  # others pass through
    ],
)
def test_aliases_map_onto_our_options(given_options: dict[str, str], expected: dict[str, str]) -> None:
    resolved = resolve(given_options, OURS)
    assert resolved.problems == []
    assert resolved.options == expected


@pytest.mark.parametrize(
    ("given_options", "needle"),
    [
        ({"kinesis.metadataCommitterType": "HDFS"}, "use metadataTableName or leaseTableName"),
        ({"kinesis.maxFetchTimePerShardSec": "10"}, "a read ends at the shard's tip"),
        ({"maxFetchDuration": "10s"}, "maxRecordsPerShardPerBatch"),
        ({"fetchBufferSize": "1gb"}, "nothing is prefetched"),
        ({"kinesis.internal.avoidEmptyBatches": "true"}, "avoids empty batches"),
        ({"kinesis.clientNumRetries": "3"}, "named retry policies"),
        ({"proxyAddress": "p"}, "HTTPS_PROXY"),
        ({"kinesis.consumerType": "Magic"}, "is not GetRecords or SubscribeToShard"),
        ({"minFetchPeriod": "soon"}, "is not a duration"),
        ({"kinesis.streamName": "a,b"}, "one query reads one stream"),
        (
            {"initialPosition": '{"at_timestamp": "06/25/2020 10:23:45 PDT", "format": "MM/dd/yyyy"}'},
            "ISO-8601",
        ),
        ({"region": "a", "kinesis.region": "b"}, "both set region, to different values"),
    ],
)
def test_unsupported_options_and_bad_values_are_named_with_what_to_do(
    given_options: dict[str, str], needle: str
) -> None:
    problems = resolve(given_options, OURS).problems
    assert len(problems) == 1 and needle in problems[0], problems
    assert next(iter(given_options)) in problems[0] or "region" in problems[0]


def test_the_same_value_under_two_names_is_fine() -> None:
    assert resolve({"region": "a", "KINESIS.region": "a"}, OURS).options == {"region": "a"}


def test_every_alias_targets_a_distinct_name_and_no_name_is_both_alias_and_unsupported() -> None:
    names = [alias.name.lower() for alias in ALIASES]
    assert len(names) == len(set(names))
    assert not set(names) & {u.name.lower() for u in UNSUPPORTED}
    assert all(alias.target != alias.name for alias in ALIASES)


@given(
    st.integers(0, 10**6),
    st.sampled_from([("ms", 1), ("s", 1000), ("min", 60_000), ("h", 3_600_000), ("", 1)]),
)
def test_durations(number: int, unit: tuple[str, int]) -> None:
    assert duration_ms(f"{number}{unit[0]}") == str(number * unit[1])


def test_value_converters_reject_what_they_cannot_read() -> None:
    with pytest.raises(ValueError, match="not a duration"):
        duration_ms("1 fortnight")
    with pytest.raises(ValueError, match="GetRecords"):
        consumer_type("efo")
    with pytest.raises(ValueError, match="not valid JSON"):
        databricks_position("{nope")
    with pytest.raises(ValueError, match="at_timestamp"):
        databricks_position('{"format": "x"}')
