"""kcl_protocol.columns: a batch held column by column writes the same processRecords line, byte for byte,
as the reference encoder writes for the same records as objects (one dict per record), and reads as the
same records."""

from __future__ import annotations

import base64

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcl_protocol import (
    AnyRecord,
    EncodedRecord,
    ProcessRecords,
    Record,
    RecordColumns,
    decode_daemon_line,
    encode_daemon_message,
    payload_bytes,
)
from kcl_protocol.codec import _daemon_dict
from tests.support.hypothesis_profiles import examples

JAVA_LONG = st.integers(-(2**63), 2**63 - 1)


def reference_line(records: tuple[AnyRecord, ...], behind: int | None) -> bytes:
    """The line as the codec writes records held as objects (a dict per record, orjson)."""
    return orjson.dumps(_daemon_dict(ProcessRecords(records, behind)), option=orjson.OPT_APPEND_NEWLINE)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# Any text Kinesis could hand over as a partition key (quotes, backslashes, control characters, U+2028,
# astral characters: all but lone surrogates, which no JSON parser gives), and sequence numbers as Kinesis
# writes them or as any text.
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
sequence_numbers = st.one_of(st.from_regex(r"[1-9][0-9]{0,55}", fullmatch=True), texts)
encoded = st.builds(
    EncodedRecord,
    data_b64=st.binary(max_size=40).map(b64),
    partition_key=texts,
    sequence_number=sequence_numbers,
    sub_sequence_number=st.one_of(st.just(0), JAVA_LONG),
    approximate_arrival_timestamp=JAVA_LONG,
)
decoded = st.builds(
    Record,
    data=st.binary(max_size=40),
    partition_key=texts,
    sequence_number=sequence_numbers,
    sub_sequence_number=st.one_of(st.just(0), st.integers(0, 2**63 - 1)),
    approximate_arrival_timestamp=JAVA_LONG,
)
behinds = st.one_of(st.none(), JAVA_LONG)


def as_encoded(record: AnyRecord) -> EncodedRecord:
    if type(record) is EncodedRecord:
        return record
    return EncodedRecord(
        b64(record.data),
        record.partition_key,
        record.sequence_number,
        record.sub_sequence_number,
        record.approximate_arrival_timestamp,
    )


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.one_of(encoded, decoded), max_size=12), behinds, st.integers(0, 12), st.integers(0, 12))
def test_the_column_line_is_the_reference_line(
    records: list[AnyRecord], behind: int | None, start: int, stop: int
) -> None:
    columns = RecordColumns.of(records)
    expected = tuple(as_encoded(r) for r in records)
    assert encode_daemon_message(ProcessRecords(columns, behind)) == reference_line(expected, behind)
    assert list(columns) == list(expected)
    assert [columns[i] for i in range(-len(records), len(records))] == [*expected, *expected]
    assert payload_bytes(columns) == sum(r.size for r in records) == payload_bytes(expected)
    part = columns[start:stop]
    assert type(part) is RecordColumns
    assert part == expected[start:stop]
    assert encode_daemon_message(ProcessRecords(part, behind)) == reference_line(expected[start:stop], behind)
    assert payload_bytes(part) == sum(r.size for r in expected[start:stop])


@pytest.mark.parametrize(
    ("key", "verbatim"),
    [
        ("pk-1", True),
        ("é ü 日本 \U0001f600", True),  # UTF-8 is written as it is, as orjson and Jackson do
        ("line\u2028separator", True),
        ("delete\x7f", True),
        ('a "quoted" key', False),
        ("back\\slash", False),
        ("new\nline", False),
        ("tab\t", False),
        ("unit separator\x1f", False),
        ("nul\x00", False),
    ],
)
def test_keys_that_need_escaping_take_the_reference_encoder(key: str, verbatim: bool) -> None:
    columns = RecordColumns([b64(b"hi"), b64(b"")], ["plain", key], ["1", "2"], [5, 6])
    assert columns.verbatim() is verbatim
    line = encode_daemon_message(ProcessRecords(columns, 0))
    assert line == reference_line(tuple(columns), 0)
    message = decode_daemon_line(line)
    assert isinstance(message, ProcessRecords)
    assert [r.partition_key for r in message.records] == ["plain", key]


@pytest.mark.parametrize(
    ("columns", "behind", "line"),
    [
        (
            RecordColumns([], [], [], []),
            None,
            b'{"action":"processRecords","records":[],"millisBehindLatest":null}\n',
        ),
        (
            RecordColumns(["aGk="], ["pk"], ["49590"], [1_700_000_000_123]),
            0,
            b'{"action":"processRecords","records":[{"data":"aGk=","partitionKey":"pk","sequenceNumber":"49590",'
            b'"approximateArrivalTimestamp":1700000000123,"subSequenceNumber":0,"action":"record"}],'
            b'"millisBehindLatest":0}\n',
        ),
        (  # de-aggregated: the sub-sequence numbers are a column of their own
            RecordColumns(["YQ==", "Yg=="], ["a", "b"], ["7", "7"], [1, 1], [0, 1]),
            12,
            b'{"action":"processRecords","records":[{"data":"YQ==","partitionKey":"a","sequenceNumber":"7",'
            b'"approximateArrivalTimestamp":1,"subSequenceNumber":0,"action":"record"},{"data":"Yg==",'
            b'"partitionKey":"b","sequenceNumber":"7","approximateArrivalTimestamp":1,"subSequenceNumber":1,'
            b'"action":"record"}],"millisBehindLatest":12}\n',
        ),
    ],
)
def test_lines_as_java_writes_them(columns: RecordColumns, behind: int | None, line: bytes) -> None:
    assert encode_daemon_message(ProcessRecords(columns, behind)) == line
    assert reference_line(tuple(columns), behind) == line


@pytest.mark.parametrize(
    ("texts", "size"),
    [([], 0), ([""], 0), (["aGk="], 2), (["eA=="], 1), (["eHl6"], 3), (["aGk=", "eA==", "eHl6", ""], 6)],
)
def test_payload_bytes_from_the_base64_text(texts: list[str], size: int) -> None:
    columns = RecordColumns(texts, ["k"] * len(texts), ["1"] * len(texts), [0] * len(texts))
    assert columns.payload_bytes == size == sum(len(base64.b64decode(t)) for t in texts)
    # a reader that joined the texts already (the de-aggregator's magic search) hands its text on
    handed = RecordColumns(
        texts, ["k"] * len(texts), ["1"] * len(texts), [0] * len(texts), joined_b64="|".join(texts)
    )
    assert handed.payload_bytes == size and handed.verbatim() == columns.verbatim()


def test_lone_surrogates_fail_as_the_reference_encoder_fails() -> None:
    columns = RecordColumns(["aGk="], ["\ud800"], ["1"], [0])
    assert not columns.verbatim()
    with pytest.raises(orjson.JSONEncodeError):
        encode_daemon_message(ProcessRecords(columns, 0))


def test_columns_of_unequal_length_are_refused() -> None:
    with pytest.raises(ValueError, match="same length"):
        RecordColumns(["aGk="], [], ["1"], [0])
    with pytest.raises(ValueError, match="same length"):
        RecordColumns(["aGk="], ["k"], ["1"], [0], [0, 1])


def test_a_sequence_of_encoded_records_not_a_hashable_one() -> None:
    columns = RecordColumns(["aGk="], ["k"], ["1"], [5])
    assert columns == (EncodedRecord("aGk=", "k", "1", 0, 5),)
    assert columns != (EncodedRecord("aGk=", "k", "1", 1, 5),)
    assert columns != "aGk="
    assert repr(columns) == "RecordColumns(1 records)"
    with pytest.raises(TypeError):
        hash(columns)
