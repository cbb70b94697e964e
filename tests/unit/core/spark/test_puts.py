"""The Kinesis sink's decisions: columns, row limits, PutRecords calls, what to send again, misroutes."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.spark.puts import (
    MAX_BYTES_PER_CALL,
    MAX_ENTRIES_PER_CALL,
    MAX_RECORD_BYTES,
    EntryResult,
    Failure,
    calls_for,
    check_columns,
    entry_problem,
    misrouted,
    retry_plan,
)


@pytest.mark.parametrize(
    ("columns", "problems"),
    [
        ({"data": "binary", "partitionKey": "string"}, []),
        ({"data": "string", "partitionKey": "string", "explicitHashKey": "string"}, []),
        ({"partitionKey": "string"}, ["column 'data' is required"]),
        ({"data": "int", "partitionKey": "string"}, ["column 'data' is int, not binary or string"]),
        ({"data": "binary", "partitionKey": "binary"}, ["column 'partitionKey' is binary, not string"]),
        (
            {"data": "binary", "partitionKey": "string", "explicitHashKey": "bigint"},
            ["'explicitHashKey' is bigint"],
        ),
        ({"data": "binary", "partitionkey": "string"}, ["'partitionKey' is required", "'partitionkey'"]),
    ],
)
def test_columns(columns: dict[str, str], problems: list[str]) -> None:
    found = check_columns(columns)
    assert len(found) == len(problems)
    for needle, problem in zip(problems, found, strict=True):
        assert needle in problem


@pytest.mark.parametrize(
    ("data", "key", "ehk", "needle"),
    [
        (b"x", "k", None, None),
        (b"x", "k", str(2**128 - 1), None),
        (None, "k", None, "data is null"),
        (b"x", "", None, "1 to 256 characters"),
        (b"x", "k" * 257, None, "1 to 256 characters"),
        (b"x" * MAX_RECORD_BYTES, "k", None, "record limit"),
        (b"x" * (MAX_RECORD_BYTES - 1), "k", None, None),
        (b"x", "k", str(2**128), "0..2^128-1"),
        (b"x", "k", "-1", "0..2^128-1"),
    ],
)
def test_rows_against_the_service_limits(
    data: bytes | None, key: str, ehk: str | None, needle: str | None
) -> None:
    problem = entry_problem(data, key, ehk)
    assert (problem is None) == (needle is None)
    if needle is not None:
        assert problem is not None and needle in problem


@given(st.lists(st.integers(1, MAX_RECORD_BYTES), max_size=1200))
def test_calls_stay_within_500_entries_and_5_mib_and_keep_the_order(sizes: list[int]) -> None:
    calls = calls_for(sizes)
    assert [i for call in calls for i in call] == list(range(len(sizes)))
    for call in calls:
        assert 1 <= len(call) <= MAX_ENTRIES_PER_CALL
        assert sum(sizes[i] for i in call) <= MAX_BYTES_PER_CALL
    for first, second in itertools.pairwise(calls):  # a call ends only when the next entry did not fit
        assert (
            len(first) == MAX_ENTRIES_PER_CALL
            or sum(sizes[i] for i in first) + sizes[second[0]] > MAX_BYTES_PER_CALL
        )


def test_which_entries_are_sent_again() -> None:
    results = [
        EntryResult("s1", "1"),
        EntryResult(error_code="ProvisionedThroughputExceededException", error_message="slow down"),
        EntryResult(error_code="InternalFailure"),
        EntryResult(error_code="KMSAccessDeniedException", error_message="no"),
        EntryResult("s2", "2"),
    ]
    plan = retry_plan(results)
    assert plan.retry == (1, 2)
    assert plan.failed == (Failure(3, "KMSAccessDeniedException", "no"),)
    assert retry_plan([EntryResult("s", "1")]).done


def test_an_aggregate_is_misrouted_when_its_shard_does_not_hold_every_record() -> None:
    shard = Shard("s", starting_hash_key=10, ending_hash_key=20)
    assert not misrouted([10, 15, 20], shard)
    assert misrouted([10, 21], shard)
    assert misrouted([10], None)
