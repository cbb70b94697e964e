"""Replay records files: valid shapes, and errors that name the line."""

from __future__ import annotations

import pytest

from kcl_daemon.errors import RecordsFileError
from kcl_daemon.replay.input import InjectedFailure, parse_injected_failure, parse_records


def parse(*lines: str, shard: str = "shardId-0") -> dict[str, list[object]]:
    return parse_records([line.encode() for line in lines], "r.jsonl", shard)  # type: ignore[return-value]


def test_text_data_defaults_and_shards() -> None:
    shards = parse(
        '{"text": "hé", "partitionKey": "a"}',
        "",
        '{"data": "AAE=", "partitionKey": "b", "approximateArrivalTimestamp": 5}',
        '{"text": "x", "partitionKey": "c", "shardId": "s-2", "sequenceNumber": "10", '
        '"subSequenceNumber": 1}',
        '{"text": "y", "partitionKey": "c", "shardId": "s-2", "sequenceNumber": "10", '
        '"subSequenceNumber": 2}',
    )
    first, second = shards["shardId-0"]
    assert first.data == "hé".encode() and first.partition_key == "a"  # type: ignore[attr-defined]
    assert int(second.sequence_number) == int(first.sequence_number) + 1  # type: ignore[attr-defined]
    assert second.data == b"\x00\x01" and second.approximate_arrival_timestamp == 5  # type: ignore[attr-defined]
    assert [r.sub_sequence_number for r in shards["s-2"]] == [1, 2]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "r.jsonl:2: not valid JSON"),
        ("[1]", "r.jsonl:2: each line must be a JSON object"),
        ('{"partitionKey": "a"}', 'exactly one of "text"'),
        ('{"text": "a", "data": "AA==", "partitionKey": "a"}', 'exactly one of "text"'),
        ('{"data": "%%%", "partitionKey": "a"}', "not valid standard base64"),
        ('{"text": "a"}', '"partitionKey" is required'),
        ('{"text": "a", "partitionKey": "a", "partitonKey": "typo"}', "unknown field(s) partitonKey"),
        ('{"text": "a", "partitionKey": "a", "sequenceNumber": "12a"}', "decimal digits"),
        ('{"text": "a", "partitionKey": "a", "sequenceNumber": "1"}', "does not increase"),
        ('{"text": "a", "partitionKey": "a", "sequenceNumber": "' + "9" * 5000 + '"}', "5000 digits"),
        ('{"text": "a", "partitionKey": "a", "subSequenceNumber": -1}', "whole number >= 0"),
        ('{"text": "a", "partitionKey": "a", "approximateArrivalTimestamp": "now"}', "epoch milliseconds"),
    ],
)
def test_errors_name_the_line(line: str, message: str) -> None:
    with pytest.raises(RecordsFileError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        parse('{"text": "first", "partitionKey": "a", "sequenceNumber": "5"}', line)
    assert "r.jsonl:2:" in str(info.value)


def test_empty_file() -> None:
    with pytest.raises(RecordsFileError, match="no records"):
        parse("", "  ")


def test_injected_failures() -> None:
    assert parse_injected_failure("ThrottlingException") == InjectedFailure("ThrottlingException", None)
    assert parse_injected_failure("ShutdownException@3") == InjectedFailure("ShutdownException", 3)
    with pytest.raises(ValueError, match="not a checkpoint error"):
        parse_injected_failure("Boom")
    with pytest.raises(ValueError, match="attempt number"):
        parse_injected_failure("ThrottlingException@0")
