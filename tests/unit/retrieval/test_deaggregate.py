"""KPL de-aggregation (contract §1.12): splitting, the library's silent failures, hash-range filtering."""

from __future__ import annotations

import hashlib
import logging

import pytest
from aws_kinesis_agg import MAGIC
from aws_kinesis_agg.aggregator import RecordAggregator
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.aws.kinesis import RawRecord
from kcl_daemon.core.leases.lease import MAX_HASH_KEY
from kcl_daemon.retrieval.deaggregate import Deaggregator, effective_hash_key, messages_pb2
from kcl_protocol import Record

SEQ = "49590338271490256608559692538361571095921575989136588898"
TS = 1_700_000_000_123
SECRET = b"do-not-log-this-payload"


def aggregate(*users: tuple[str, bytes, str | None]) -> bytes:
    agg = RecordAggregator()
    for partition_key, data, ehk in users:
        assert agg.add_user_record(partition_key, data, ehk) is None
    record = agg.clear_and_get()
    assert record is not None
    return bytes(record.get_contents()[2])


def raw(data: bytes, seq: str = SEQ, pk: str = "outer") -> RawRecord:
    return RawRecord(data, pk, seq, TS)


def framed(message: bytes) -> bytes:
    return MAGIC + message + hashlib.md5(message, usedforsecurity=False).digest()


def hash_of(pk: str) -> int:
    return int.from_bytes(hashlib.md5(pk.encode(), usedforsecurity=False).digest(), "big")


def test_plain_record_passes_through_with_sub_sequence_zero() -> None:
    deagg = Deaggregator("shardId-0")
    assert deagg.deaggregate([raw(b"hello", pk="pk")]) == [Record(b"hello", "pk", SEQ, 0, TS)]
    assert deagg.stats.aggregates == 0
    assert deagg.stats.undecodable == 0


def test_aggregate_is_split_in_order_with_the_outer_sequence_number_and_arrival_time() -> None:
    users = [("alpha", b"a", None), ("bravo", b"b", None), ("alpha", b"c", None)]
    deagg = Deaggregator("shardId-0")
    out = deagg.deaggregate([raw(aggregate(*users)), raw(b"plain", seq=SEQ + "1")])
    assert out == [
        Record(b"a", "alpha", SEQ, 0, TS),
        Record(b"b", "bravo", SEQ, 1, TS),
        Record(b"c", "alpha", SEQ, 2, TS),
        Record(b"plain", "outer", SEQ + "1", 0, TS),
    ]
    assert (deagg.stats.aggregates, deagg.stats.user_records) == (1, 3)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (MAGIC + b"x" * 16, "too short"),
        (MAGIC + b"\x1a\x02ab" + b"\x00" * 16, "checksum"),
        (framed(b"\xff\xff\xff"), "protobuf"),
    ],
)
def test_magic_prefixed_garbage_is_delivered_whole_counted_and_logged_without_payload(
    data: bytes, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    deagg = Deaggregator("shardId-0")
    with caplog.at_level(logging.WARNING):
        out = deagg.deaggregate([raw(data)])
    assert out == [Record(data, "outer", SEQ, 0, TS)]
    assert deagg.stats.undecodable == 1
    assert why in caplog.text
    assert SEQ in caplog.text


def test_corrupted_checksum_of_a_real_aggregate_is_undecodable() -> None:
    data = bytearray(aggregate(("alpha", SECRET, None)))
    data[-1] ^= 0xFF
    deagg = Deaggregator("shardId-0")
    assert deagg.deaggregate([raw(bytes(data))]) == [Record(bytes(data), "outer", SEQ, 0, TS)]
    assert deagg.stats.undecodable == 1


def test_bad_index_keeps_sub_records_before_it_and_never_prints_the_payload(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    message = messages_pb2.AggregatedRecord()
    message.partition_key_table.append("alpha")
    for index, data in ((0, b"first"), (5, SECRET), (0, b"third")):
        sub = message.records.add()
        sub.partition_key_index = index
        sub.data = data
    deagg = Deaggregator("shardId-0")
    with caplog.at_level(logging.INFO):
        out = deagg.deaggregate([raw(framed(message.SerializeToString()))])
    assert out == [Record(b"first", "alpha", SEQ, 0, TS)]
    assert deagg.stats.partial == 1
    captured = capsys.readouterr()
    assert "do-not-log" not in captured.err + captured.out + caplog.text
    assert "sub-record 1 of 3" in caplog.text


def test_explicit_hash_keys_are_read_per_sub_record_not_from_the_library() -> None:
    # The library hands "charlie"'s EHK to every sub-record; the others must hash by partition key.
    low_half_end = MAX_HASH_KEY // 2
    pk_low = next(f"k{i}" for i in range(1000) if hash_of(f"k{i}") <= low_half_end)
    users = [(pk_low, b"a", None), ("charlie", b"b", "5"), (pk_low, b"c", None)]
    deagg = Deaggregator("shardId-low", 0, low_half_end)
    out = deagg.deaggregate([raw(aggregate(*users))])
    assert [r.data for r in out] == [b"a", b"b", b"c"]


def test_one_sub_record_outside_the_hash_range_drops_the_whole_aggregate() -> None:
    low_half_end = MAX_HASH_KEY // 2
    users = [("x", b"a", "1"), ("y", b"b", str(low_half_end + 1)), ("z", b"c", "2")]
    deagg = Deaggregator("shardId-low", 0, low_half_end)
    plain = raw(b"plain", seq=SEQ + "9")
    assert deagg.deaggregate([raw(aggregate(*users)), plain]) == [Record(b"plain", "outer", SEQ + "9", 0, TS)]
    assert (deagg.stats.out_of_range_aggregates, deagg.stats.out_of_range_records) == (1, 3)


def test_plain_records_are_never_range_filtered() -> None:
    deagg = Deaggregator("shardId-x", 0, 0)
    assert len(deagg.deaggregate([raw(b"plain")])) == 1


@pytest.mark.parametrize(
    ("pk", "ehk", "expected"),
    [
        ("", None, int("d41d8cd98f00b204e9800998ecf8427e", 16)),
        ("a", None, int("0cc175b9c0f1b6a831c399e269772661", 16)),
        ("ignored", 42, 42),
        ("ü", None, hash_of("ü")),
    ],
)
def test_effective_hash_key(pk: str, ehk: int | None, expected: int) -> None:
    assert effective_hash_key(pk, ehk) == expected


@given(
    st.lists(
        st.tuples(st.text(min_size=1, max_size=8), st.binary(max_size=20), st.booleans()),
        min_size=1,
        max_size=12,
    )
)
def test_round_trip_through_the_library_aggregator(users: list[tuple[str, bytes, bool]]) -> None:
    with_ehk = [(pk, data, str(hash_of(pk)) if explicit else None) for pk, data, explicit in users]
    deagg = Deaggregator("shardId-0")
    out = deagg.deaggregate([raw(aggregate(*with_ehk))])
    assert [(r.partition_key, r.data, r.sub_sequence_number) for r in out] == [
        (pk, data, index) for index, (pk, data, _) in enumerate(users)
    ]
    assert deagg.stats.undecodable == deagg.stats.partial == 0
