"""The Spark source's pure parts: options, canonical offsets, shard tracking, budgets, lease decisions."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.lease import Lease
from kcl_daemon.core.sequence import LATEST, SHARD_END, TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.errors import ConfigError
from kcl_daemon.spark.lease_rules import (
    checkpoints_to_write,
    children_of,
    is_ahead,
    live_owners,
    positions_from_leases,
)
from kcl_daemon.spark.offsets import (
    AT_SHARD_END,
    AT_TRIM_HORIZON,
    BadOffset,
    ShardPos,
    SourceOffset,
    after,
    at_timestamp,
    group_ranges,
    initial_offset,
    readable_shards,
    shard_ranges,
    split_budget,
    track_new_shards,
)
from kcl_daemon.spark.options import (
    OPTION_DOCS,
    OPTION_NAMES,
    StartingPosition,
    StartKind,
    markdown_table,
    parse_options,
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


def test_credentials_never_show_in_repr() -> None:
    options = parse_options({"streamName": "s", "awsAccessKeyId": "AKID", "awsSecretKey": "SECRET"})
    assert "SECRET" not in repr(options) and "AKID" not in repr(options)


# -- offsets -----------------------------------------------------------------------------------

positions = st.one_of(
    st.just(AT_TRIM_HORIZON),
    st.just(AT_SHARD_END),
    st.integers(0, 2**64).map(at_timestamp),
    st.tuples(st.integers(0, 10**56), st.integers(0, 1000)).map(lambda t: after(str(t[0]), t[1])),
)
offsets = st.dictionaries(st.from_regex(r"shardId-[0-9]{12}", fullmatch=True), positions, max_size=8).map(
    lambda shards: SourceOffset("stream", shards)
)


@given(offsets)
def test_offsets_round_trip_and_serialise_canonically(offset: SourceOffset) -> None:
    text = json.dumps(offset.to_json())
    assert SourceOffset.from_json(json.loads(text)) == offset
    shuffled = SourceOffset(offset.stream, dict(reversed(list(offset.shards.items()))))
    assert json.dumps(shuffled.to_json()) == text  # Spark compares offsets as strings


def test_a_foreign_offset_is_refused() -> None:
    with pytest.raises(BadOffset, match="version"):
        SourceOffset.from_json({"shards": {}})
    with pytest.raises(BadOffset, match="malformed"):
        SourceOffset.from_json({"v": 1, "stream": "s", "shards": {"a": {"seq": 5}}})


def split_world() -> list[Shard]:
    """shard 0 split into 2 and 3; 1 and 3 merged into 4; 2 still open."""
    return [
        Shard("s0", ending_sequence_number=10),
        Shard("s1", ending_sequence_number=20),
        Shard("s2", parent_shard_id="s0"),
        Shard("s3", parent_shard_id="s0", ending_sequence_number=30),
        Shard("s4", parent_shard_id="s1", adjacent_parent_shard_id="s3"),
    ]


def test_initial_offset_by_starting_position() -> None:
    shards = split_world()
    trim = initial_offset("st", shards, StartingPosition(StartKind.TRIM_HORIZON), 0)
    assert set(trim.shards) == {"s0", "s1", "s2", "s3", "s4"}
    latest = initial_offset("st", shards, StartingPosition(StartKind.LATEST), 1234)
    assert latest.shards == {"s2": at_timestamp(1234), "s4": at_timestamp(1234)}


def test_initial_offset_from_the_lease_table() -> None:
    shards = split_world()
    leases = {"s0": ShardPos(SHARD_END), "s1": after("15", 2), "s3": after("25")}
    offset = initial_offset("st", shards, StartingPosition(StartKind.LEASE_TABLE), 0, lease_positions=leases)
    # leased shards at their checkpoints (sub-sequence kept), children of leased shards from the start
    assert offset.shards == {
        "s0": AT_SHARD_END,
        "s1": after("15", 2),
        "s2": AT_TRIM_HORIZON,
        "s3": after("25"),
        "s4": AT_TRIM_HORIZON,
    }


def test_children_wait_until_every_parent_is_at_shard_end_in_the_start_offset() -> None:
    shards = split_world()
    start = SourceOffset("st", {"s0": after("5"), "s1": after("15")})
    tracked = track_new_shards(start, shards)
    assert set(tracked.shards) == {"s0", "s1", "s2", "s3", "s4"}
    assert readable_shards(start, tracked, shards) == ["s0", "s1"]
    start = SourceOffset("st", {**tracked.shards, "s0": AT_SHARD_END})
    assert readable_shards(start, start, shards) == ["s1", "s2", "s3"]  # s4 waits for s1 and s3
    start = SourceOffset("st", {**start.shards, "s1": AT_SHARD_END, "s3": AT_SHARD_END})
    assert readable_shards(start, start, shards) == ["s2", "s4"]


def test_finished_shards_that_are_no_longer_listed_are_dropped() -> None:
    start = SourceOffset("st", {"gone": AT_SHARD_END, "s2": after("3")})
    assert set(track_new_shards(start, [Shard("s2")]).shards) == {"s2"}


@given(st.integers(1, 10_000), st.integers(1, 5_000), st.integers(1, 20))
def test_the_budget_never_exceeds_the_limit_or_the_cap(max_rows: int, cap: int, n: int) -> None:
    shards = [f"s{i}" for i in range(n)]
    budget = split_budget(max_rows, cap, shards)
    assert sum(budget.values()) <= max_rows
    assert all(0 <= b <= cap for b in budget.values())
    assert sum(budget.values()) == min(max_rows, cap * n) or max(budget.values()) == cap


def test_ranges_cover_moved_shards_and_group_by_shards_per_task() -> None:
    start = SourceOffset("st", {"a": after("1"), "b": after("2"), "c": after("3")})
    end = SourceOffset("st", {"a": after("9"), "b": after("2"), "c": AT_SHARD_END, "d": AT_TRIM_HORIZON})
    ranges = shard_ranges(start, end, {})
    assert [(r.shard_id, r.start, r.end) for r in ranges] == [
        ("a", after("1"), after("9")),
        ("c", after("3"), AT_SHARD_END),
    ]
    assert [len(g) for g in group_ranges(ranges * 3, 4)] == [4, 2]
    assert [len(g) for g in group_ranges(ranges, 1)] == [1, 1]


# -- lease decisions ---------------------------------------------------------------------------


def lease(key: str, checkpoint: ExtendedSequenceNumber, owner: str | None = None, counter: int = 1) -> Lease:
    return Lease(key, checkpoint, lease_owner=owner, lease_counter=counter)


def test_lease_checkpoints_become_positions_sub_sequence_exact() -> None:
    leases = [
        lease("a", ExtendedSequenceNumber("100", 3)),
        lease("b", SHARD_END),
        lease("c", TRIM_HORIZON),
        lease("d", LATEST),
    ]
    assert positions_from_leases(leases) == {
        "a": after("100", 3),
        "b": AT_SHARD_END,
        "c": AT_TRIM_HORIZON,
    }


def test_live_owners_are_those_whose_counters_moved() -> None:
    before = [lease("a", TRIM_HORIZON, "w1", 5), lease("b", TRIM_HORIZON, "w2", 7), lease("c", TRIM_HORIZON)]
    after_ = [lease("a", TRIM_HORIZON, "w1", 6), lease("b", TRIM_HORIZON, "w2", 7), lease("c", TRIM_HORIZON)]
    assert [(x.lease_key, x.owner) for x in live_owners(before, after_, "me")] == [("a", "w1")]
    mine = [lease("a", TRIM_HORIZON, "me", 9)]
    assert live_owners(before, mine, "me") == []


def test_only_forward_real_positions_are_written() -> None:
    offset = SourceOffset(
        "st", {"a": after("10", 1), "b": after("5"), "c": AT_TRIM_HORIZON, "d": AT_SHARD_END}
    )
    written = {"a": ExtendedSequenceNumber("10", 0), "b": ExtendedSequenceNumber("7"), "d": TRIM_HORIZON}
    assert checkpoints_to_write(offset, written) == {"a": ExtendedSequenceNumber("10", 1), "d": SHARD_END}


def test_children_and_ahead() -> None:
    assert [c.shard_id for c in children_of("s0", split_world())] == ["s2", "s3"]
    assert is_ahead(ExtendedSequenceNumber("20"), after("10"))
    assert not is_ahead(ExtendedSequenceNumber("10", 0), after("10", 0))
    assert not is_ahead(LATEST, after("10"))


def test_docs_options_table_is_generated_from_the_options() -> None:
    page = (REPO / "docs" / "spark.md").read_text(encoding="utf-8")
    start = page.index("<!-- spark-options:start -->\n") + len("<!-- spark-options:start -->\n")
    end = page.index("\n<!-- spark-options:end -->")
    assert page[start:end] == markdown_table(), (
        "regenerate: python -c 'from kcl_daemon.spark.options import *; print(markdown_table())'"
    )
    assert tuple(OPTION_DOCS) == OPTION_NAMES
