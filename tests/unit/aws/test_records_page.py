"""The raw GetRecords path: a page parsed with orjson into columns and payloads passed through as base64
text must give the child exactly the bytes the botocore-parsed, decoded path gives (plain and KPL
records), record by record and as the drain path's column batch."""

from __future__ import annotations

import base64
import hashlib

import boto3  # noqa: TID251 - the output shape of the reference parse
import orjson
import pytest
from aws_kinesis_agg import MAGIC
from aws_kinesis_agg.aggregator import RecordAggregator
from botocore.parsers import create_parser  # noqa: TID251 - the reference parse the raw path replaces
from hypothesis import given, settings
from hypothesis import strategies as st

from kcl_daemon.aws.kinesis import record_from_response
from kcl_daemon.aws.records_page import EncodedRawRecord, PageRecords, epoch_millis_of, parse_page
from kcl_daemon.retrieval.deaggregate import MAGIC_B64_PREFIX, Deaggregator
from kcl_protocol import (
    AnyRecord,
    EncodedRecord,
    ProcessRecords,
    Record,
    encode_daemon_message,
    payload_bytes,
)
from tests.support.hypothesis_profiles import examples

_OUTPUT_SHAPE = (
    boto3.session.Session(region_name="us-east-1")
    .client("kinesis")
    .meta.service_model.operation_model("GetRecords")
    .output_shape
)


def botocore_parse(body: bytes) -> dict[str, object]:
    return create_parser("json").parse({"body": body, "headers": {}, "status_code": 200}, _OUTPUT_SHAPE)


def aggregate(users: list[tuple[str, bytes]]) -> bytes:
    agg = RecordAggregator()
    for key, data in users:
        assert agg.add_user_record(key, data) is None
    record = agg.clear_and_get()
    assert record is not None
    return bytes(record.get_contents()[2])


def corrupt_aggregate(tail: bytes) -> bytes:
    return MAGIC + tail  # magic prefix, bad checksum or too short: delivered undecoded


keys = st.text(min_size=1, max_size=20)
payloads = st.one_of(
    st.binary(max_size=300),
    st.lists(st.tuples(keys, st.binary(max_size=50)), min_size=1, max_size=5).map(aggregate),
    st.binary(max_size=40).map(corrupt_aggregate),
)
# Arrival times as Kinesis sends them: epoch seconds with milliseconds (and some with more digits).
arrivals = st.one_of(
    st.integers(1_500_000_000_000, 1_900_000_000_000).map(lambda ms: ms / 1000),
    st.floats(1.5e9, 1.9e9),
)


def body_of(records: list[tuple[bytes, str, float]], behind: int) -> bytes:
    return orjson.dumps(
        {
            "Records": [
                {
                    "Data": base64.b64encode(data).decode(),
                    "PartitionKey": key,
                    "SequenceNumber": str(49_000_000 + index),
                    "ApproximateArrivalTimestamp": arrival,
                }
                for index, (data, key, arrival) in enumerate(records)
            ],
            "NextShardIterator": "AAAA",
            "MillisBehindLatest": behind,
        }
    )


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.tuples(payloads, keys, arrivals), max_size=12), st.integers(0, 10**9))
def test_pass_through_is_byte_identical_to_the_decoded_path(
    records: list[tuple[bytes, str, float]], behind: int
) -> None:
    body = body_of(records, behind)
    decoded = [record_from_response(r) for r in botocore_parse(body)["Records"]]  # type: ignore[attr-defined]
    page = parse_page(body)
    reference = Deaggregator("shardId-0").deaggregate(decoded)
    passed = Deaggregator("shardId-0").deaggregate(page.records)
    line = encode_daemon_message(ProcessRecords(tuple(reference), behind))
    assert encode_daemon_message(ProcessRecords(tuple(passed), behind)) == line
    # the drain path: the page's columns handed on (or, with an aggregate in it, split) as RecordColumns
    columns = Deaggregator("shardId-0").columns(page.records)
    assert encode_daemon_message(ProcessRecords(columns, behind)) == line
    assert payload_bytes(columns) == sum(len(r.data) for r in reference)
    assert list(columns) == [as_encoded(r) for r in reference]
    assert Deaggregator("shardId-0").columns(decoded) == columns  # botocore's decoded records alike
    assert [r.sequence_number for r in page.records] == [r.sequence_number for r in decoded]
    assert [r.approximate_arrival_timestamp for r in page.records] == [
        r.approximate_arrival_timestamp for r in decoded
    ]


def as_encoded(record: AnyRecord) -> EncodedRecord:
    if type(record) is EncodedRecord:
        return record
    return EncodedRecord(
        base64.b64encode(record.data).decode(),
        record.partition_key,
        record.sequence_number,
        record.sub_sequence_number,
        record.approximate_arrival_timestamp,
    )


def test_a_page_without_aggregates_is_handed_on_as_its_own_columns() -> None:
    page = parse_page(body_of([(b"hello", "pk", 1.7e9), (b"x" * 100, "pk2", 1.7e9)], 0))
    records = page.records
    assert isinstance(records, PageRecords)
    columns = Deaggregator("shardId-0").columns(records)
    assert columns.data_b64 is records.data_b64  # the same lists: nothing built per record
    assert columns.sequence_numbers is records.sequence_numbers
    assert columns.sub_sequence_numbers is None
    assert columns.payload_bytes == 105
    assert records[1:] == [records[1]]
    assert records == PageRecords.of(list(records))
    assert repr(records) == "PageRecords(2 records)"


def test_plain_payloads_are_never_decoded() -> None:
    page = parse_page(body_of([(b"hello", "pk", 1_700_000_000.5)], 0))
    [record] = Deaggregator("shardId-0").deaggregate(page.records)
    assert record == EncodedRecord(
        base64.b64encode(b"hello").decode(), "pk", "49000000", 0, 1_700_000_000_500
    )
    assert record.decoded() == Record(b"hello", "pk", "49000000", 0, 1_700_000_000_500)


def test_aggregates_are_still_split() -> None:
    page = parse_page(body_of([(aggregate([("a", b"1"), ("b", b"2")]), "outer", 1.7e9)], 0))
    out = Deaggregator("shardId-0").deaggregate(page.records)
    assert [(r.data, r.partition_key, r.sub_sequence_number) for r in out] == [(b"1", "a", 0), (b"2", "b", 1)]
    assert all(type(r) is Record for r in out)


def test_magic_prefix_text_matches_every_payload_that_starts_with_the_magic() -> None:
    for last in range(256):
        assert base64.b64encode(MAGIC + bytes([last])).decode().startswith(MAGIC_B64_PREFIX)
    assert hashlib.md5(b"", usedforsecurity=False)  # the checksum the format uses is available


def test_children_and_end_of_shard_are_read() -> None:
    body = orjson.dumps(
        {
            "Records": [],
            "ChildShards": [
                {
                    "ShardId": "shardId-2",
                    "ParentShards": ["shardId-0"],
                    "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "5"},
                }
            ],
        }
    )
    page = parse_page(body)
    assert page.next_iterator is None
    assert page.millis_behind_latest is None
    assert [(c.shard_id, c.parent_shard_ids, c.ending_hash_key) for c in page.child_shards] == [
        ("shardId-2", ("shardId-0",), 5)
    ]


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b"not json",
        b'{"Records": [{"Data": 5, "PartitionKey": "k", "SequenceNumber": "1"}]}',
        b'{"Records": [{"PartitionKey": "k", "SequenceNumber": "1"}]}',
        b'{"Records": [{"Data": "", "PartitionKey": "k", "SequenceNumber": "1", '
        b'"ApproximateArrivalTimestamp": []}]}',
        b'{"Records": [{"Data": "", "PartitionKey": "k", "SequenceNumber": "1", '
        b'"ApproximateArrivalTimestamp": 1.0}, {"Data": "", "PartitionKey": "k", "SequenceNumber": "2", '
        b'"ApproximateArrivalTimestamp": true}]}',
        b'{"Records": [{"Data": "", "PartitionKey": null, "SequenceNumber": "1"}]}',
        b'{"Records": [{"Data": "", "PartitionKey": "k", "SequenceNumber": 1}]}',
        b'{"Records": {"Data": ""}}',
        b'{"Records": [["Data"]]}',
    ],
)
def test_malformed_pages_raise(body: bytes) -> None:
    with pytest.raises((ValueError, KeyError, TypeError)):
        parse_page(body)


def test_arrival_times_round_like_botocore() -> None:
    assert epoch_millis_of(1_700_000_000.123) == 1_700_000_000_123
    assert epoch_millis_of(1_700_000_000.1239) == 1_700_000_000_123
    assert epoch_millis_of(None) == 0
    assert epoch_millis_of("2023-11-14T22:13:20.5Z") == 1_700_000_000_500
    assert isinstance(EncodedRawRecord("aGk=", "k", "1", 0).data, bytes)
