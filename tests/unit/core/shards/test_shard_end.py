"""Whether a GetRecords response means shard end: AWS's contract, moto's and kinesalite's deviations."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.shards.graph import ChildShard, Shard
from kcl_daemon.core.shards.shard_end import ReadOutcome, ResponseFacts, children_of, judge_response

HALF = 2**127
OPEN = Shard("shardId-0", starting_sequence_number=100)
CLOSED = Shard("shardId-0", starting_sequence_number=100, ending_sequence_number=200)
EMPTY_CLOSED = Shard("shardId-0", starting_sequence_number=100, ending_sequence_number=99)
LEFT = ChildShard("shardId-1", ("shardId-0",), 0, HALF - 1)
RIGHT = ChildShard("shardId-2", ("shardId-0",), HALF, 2**128 - 1)
ORPHAN = ChildShard("shardId-3", (), 0, 1)


def facts(next_iterator: bool, children: tuple[ChildShard, ...] = (), records: int = 0) -> ResponseFacts:
    return ResponseFacts(has_next_iterator=next_iterator, child_shards=children, record_count=records)


CASES = [
    # (name, facts, shard, last_fetched, listed_children, outcome, children)
    ("AWS: more to read", facts(True, records=3), OPEN, 150, None, ReadOutcome.CONTINUE, ()),
    ("AWS: empty read, open shard", facts(True), OPEN, None, None, ReadOutcome.CONTINUE, ()),
    ("AWS: shard end", facts(False, (LEFT, RIGHT)), OPEN, 150, None, ReadOutcome.SHARD_END, (LEFT, RIGHT)),
    (
        "AWS: end with last records",
        facts(False, (LEFT,), 2),
        CLOSED,
        200,
        None,
        ReadOutcome.SHARD_END,
        (LEFT,),
    ),
    ("invalid: iterator and children", facts(True, (LEFT,)), OPEN, None, None, ReadOutcome.INVALID, ()),
    ("invalid: orphan child", facts(False, (ORPHAN,)), CLOSED, 200, None, ReadOutcome.INVALID, ()),
    ("kinesalite: no children, not listed yet", facts(False), OPEN, 150, None, ReadOutcome.LIST_SHARDS, ()),
    (
        "kinesalite: closed per listing",
        facts(False),
        CLOSED,
        200,
        (LEFT, RIGHT),
        ReadOutcome.SHARD_END,
        (LEFT, RIGHT),
    ),
    ("shard not listed any more", facts(False), None, 200, (), ReadOutcome.SHARD_END, ()),
    ("no iterator, listed open", facts(False), OPEN, 150, (), ReadOutcome.INVALID, ()),
    ("moto: closed, caught up, not listed", facts(True), CLOSED, 200, None, ReadOutcome.LIST_SHARDS, ()),
    (
        "moto: closed, caught up",
        facts(True),
        CLOSED,
        200,
        (LEFT, RIGHT),
        ReadOutcome.SHARD_END,
        (LEFT, RIGHT),
    ),
    ("moto: closed, past the end", facts(True), CLOSED, 250, (LEFT,), ReadOutcome.SHARD_END, (LEFT,)),
    ("moto: closed, not there yet", facts(True), CLOSED, 199, (LEFT,), ReadOutcome.CONTINUE, ()),
    ("moto: closed, nothing fetched", facts(True), CLOSED, None, (LEFT,), ReadOutcome.CONTINUE, ()),
    (
        "moto: closed, records in response",
        facts(True, records=1),
        CLOSED,
        200,
        (LEFT,),
        ReadOutcome.CONTINUE,
        (),
    ),
    ("moto: closed empty shard", facts(True), EMPTY_CLOSED, None, (LEFT,), ReadOutcome.SHARD_END, (LEFT,)),
]


@pytest.mark.parametrize(
    ("facts_", "shard", "last_fetched", "listed", "outcome", "children"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_judge_response(
    facts_: ResponseFacts,
    shard: Shard | None,
    last_fetched: int | None,
    listed: tuple[ChildShard, ...] | None,
    outcome: ReadOutcome,
    children: tuple[ChildShard, ...],
) -> None:
    verdict = judge_response(facts_, shard=shard, last_fetched=last_fetched, listed_children=listed)
    assert (verdict.outcome, verdict.child_shards) == (outcome, children)
    assert verdict.reason


def test_children_of_reads_parent_and_adjacent_parent() -> None:
    shards = [
        Shard("shardId-0", ending_sequence_number=5),
        Shard(
            "shardId-4",
            parent_shard_id="shardId-0",
            adjacent_parent_shard_id="shardId-9",
            starting_hash_key=7,
        ),
        Shard("shardId-2", parent_shard_id="shardId-9", adjacent_parent_shard_id="shardId-0"),
        Shard("shardId-3", parent_shard_id="shardId-9"),
    ]
    assert [
        (c.shard_id, c.parent_shard_ids, c.starting_hash_key) for c in children_of("shardId-0", shards)
    ] == [
        ("shardId-2", ("shardId-9", "shardId-0"), 0),
        ("shardId-4", ("shardId-0", "shardId-9"), 7),
    ]


@given(
    has_next=st.booleans(),
    records=st.integers(0, 3),
    children=st.sampled_from([(), (LEFT,), (LEFT, RIGHT), (ORPHAN,)]),
    shard=st.sampled_from([None, OPEN, CLOSED, EMPTY_CLOSED]),
    last=st.one_of(st.none(), st.integers(0, 300)),
    listed=st.sampled_from([None, (), (LEFT, RIGHT)]),
)
def test_properties(
    has_next: bool,
    records: int,
    children: tuple[ChildShard, ...],
    shard: Shard | None,
    last: int | None,
    listed: tuple[ChildShard, ...] | None,
) -> None:
    verdict = judge_response(
        facts(has_next, children, records), shard=shard, last_fetched=last, listed_children=listed
    )
    if listed is not None:
        assert verdict.outcome is not ReadOutcome.LIST_SHARDS  # listing once is always enough
    if verdict.outcome is ReadOutcome.SHARD_END:
        assert set(verdict.child_shards) <= set(children) | set(listed or ())
        assert all(child.parent_shard_ids for child in verdict.child_shards)
    if has_next and records:
        assert verdict.outcome in (
            ReadOutcome.CONTINUE,
            ReadOutcome.INVALID,
        )  # records never end a shard early
    if shard is OPEN and has_next and not children:
        assert verdict.outcome is ReadOutcome.CONTINUE
