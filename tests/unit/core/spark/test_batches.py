"""Micro-batches planned by the driver and ended by executors (offsets v2): tables and properties.

The property at the end drives the planner through a simulated stream (shards that grow between
batches, a split, budgets, AvailableNow cut-offs) with reads that follow the executors' stop rules, and
checks what the design promises: every record delivered exactly once, parents before children, budgets
kept, an AvailableNow run that ends, and probes only for shards whose last read reached the tip.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.spark.batches import (
    BEFORE_FIRST,
    BatchOffset,
    Decision,
    EndMissing,
    PublishedEnd,
    ShardEntry,
    Stop,
    batches_to_prune,
    committed_offset,
    decide,
    end_reason,
    first_offset,
    frontier,
    parse_offset,
    plan_next,
    positions_after,
)
from kcl_daemon.core.spark.offsets import (
    AT_SHARD_END,
    AT_TRIM_HORIZON,
    BadOffset,
    ShardPos,
    SourceOffset,
    after,
    at_timestamp,
)
from tests.support.hypothesis_profiles import examples

# -- decisions (tables) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("last", "previous_until", "until", "closed", "expected"),
    [
        (None, None, None, False, Decision.READ),  # never read: read without asking
        (Stop.BUDGET, None, None, False, Decision.READ),  # more may follow at once
        (Stop.BUDGET, 5, 5, False, Decision.READ),
        (Stop.TIP, None, None, False, Decision.PROBE),
        (Stop.TIP, 5, 5, False, Decision.PROBE),  # something may have arrived before the cut-off since
        (Stop.TIP, None, None, True, Decision.READ),  # closed since: only a read walks it to its end
        (Stop.CUTOFF, 5, 5, False, Decision.WAIT),  # the next record is after this very cut-off
        (Stop.CUTOFF, 5, 5, True, Decision.WAIT),
        (Stop.CUTOFF, 5, 9, False, Decision.PROBE),  # a later AvailableNow run
        (Stop.CUTOFF, 5, None, False, Decision.PROBE),  # a continuous trigger after an AvailableNow run
        (Stop.END, None, None, False, Decision.PROBE),  # unreachable: SHARD_END is never readable
    ],
)
def test_what_the_planner_does_with_a_shard(
    last: Stop | None, previous_until: int | None, until: int | None, closed: bool, expected: Decision
) -> None:
    assert decide(last, previous_until, until, closed=closed) is expected


@pytest.mark.parametrize(
    ("shard_end", "rows", "max_rows", "cut", "expected"),
    [
        (True, 10, 10, False, Stop.END),  # the end wins over a budget used up at the same time
        (False, 10, 10, True, Stop.BUDGET),
        (False, 3, 10, True, Stop.CUTOFF),
        (False, 3, 10, False, Stop.TIP),
        (False, 0, 10, False, Stop.TIP),
        (True, 0, 10, False, Stop.END),
    ],
)
def test_why_a_read_stopped(shard_end: bool, rows: int, max_rows: int, cut: bool, expected: Stop) -> None:
    assert end_reason(shard_end=shard_end, rows=rows, max_rows=max_rows, cut=cut) is expected


def test_a_full_bytes_budget_is_a_budget_stop_unless_the_shard_ended() -> None:
    assert end_reason(shard_end=False, rows=3, max_rows=10, cut=False, full=True) is Stop.BUDGET
    assert end_reason(shard_end=False, rows=3, max_rows=10, cut=True, full=True) is Stop.BUDGET
    assert end_reason(shard_end=True, rows=3, max_rows=10, cut=False, full=True) is Stop.END


def test_publications_of_the_two_last_committed_batches_stay() -> None:
    assert list(batches_to_prune(0)) == []
    assert list(batches_to_prune(1)) == []
    assert list(batches_to_prune(2)) == [0]
    assert list(batches_to_prune(7)) == [4, 5]  # two at a time: one commit Spark skipped is caught up


# -- the offset and the publication as JSON -----------------------------------------------------

positions = st.one_of(
    st.just(AT_TRIM_HORIZON),
    st.just(AT_SHARD_END),
    st.integers(0, 2**48).map(at_timestamp),
    st.tuples(st.integers(0, 10**56), st.integers(0, 1000)).map(lambda t: after(str(t[0]), t[1])),
)
entries = st.builds(
    ShardEntry,
    positions,
    st.one_of(st.none(), st.sampled_from(Stop)),
    st.integers(0, 10**6),
    st.booleans(),
)
batch_offsets = st.builds(
    BatchOffset,
    st.just("orders"),
    st.from_regex(r"[0-9a-f]{12}", fullmatch=True),
    st.integers(-1, 10**9),
    st.dictionaries(st.from_regex(r"shardId-[0-9]{12}", fullmatch=True), entries, max_size=6),
    st.one_of(st.none(), st.integers(0, 2**48)),
)


@given(batch_offsets)
def test_batch_offsets_round_trip_and_serialise_canonically(offset: BatchOffset) -> None:
    text = json.dumps(offset.to_json())
    assert parse_offset(json.loads(text)) == offset
    shuffled = BatchOffset(
        offset.stream, offset.run, offset.batch, dict(reversed(list(offset.shards.items()))), offset.until_ms
    )
    assert json.dumps(shuffled.to_json()) == text  # Spark compares offsets as strings


@given(positions, st.sampled_from(Stop), st.integers(0, 10**6))
def test_publications_round_trip(end: ShardPos, reason: Stop, rows: int) -> None:
    published = PublishedEnd(end, reason, rows)
    assert PublishedEnd.from_json(published.to_json()) == published


def test_offsets_of_both_versions_parse_and_anything_else_is_refused() -> None:
    v1 = SourceOffset("s", {"a": after("5")})
    assert parse_offset(v1.to_json()) == v1
    with pytest.raises(BadOffset, match="neither 1 nor 2"):
        parse_offset({"v": 3})
    with pytest.raises(BadOffset, match="malformed"):
        parse_offset({"v": 2, "stream": "s", "run": "r", "batch": 0, "until": None, "shards": {"a": {}}})
    with pytest.raises(BadOffset, match="unknown stop reason"):
        ShardEntry.from_json("a", {"from": {"seq": "1", "sub": 0}, "last": "bored", "max": 1, "read": True})
    with pytest.raises(BadOffset, match="malformed"):
        PublishedEnd.from_json('{"seq": "x"}')


def test_a_v1_checkpoint_becomes_a_first_offset_with_nothing_read_yet() -> None:
    migrated = first_offset(SourceOffset("s", {"b": after("9", 2), "a": AT_TRIM_HORIZON}), "run1")
    assert migrated.batch == BEFORE_FIRST and migrated.run == "run1" and migrated.read_shards == ()
    assert migrated.shards["b"] == ShardEntry(after("9", 2), None, 0, False)
    assert list(migrated.to_json()["shards"]) == ["a", "b"]  # type: ignore[call-overload]


# -- positions after a batch, and planning --------------------------------------------------------


def offset(batch: int, shards: Mapping[str, ShardEntry], until: int | None = None) -> BatchOffset:
    return BatchOffset("s", "run1", batch, shards, until)


def test_positions_after_a_batch_come_from_its_publications_and_a_missing_one_is_named() -> None:
    previous = offset(
        3,
        {
            "a": ShardEntry(after("10"), Stop.BUDGET, 100, True),
            "b": ShardEntry(after("20"), Stop.TIP, 0, False),
        },
    )
    ends = {"a": PublishedEnd(after("30", 4), Stop.BUDGET, 100)}
    assert positions_after(previous, ends) == {
        "a": (after("30", 4), Stop.BUDGET),
        "b": (after("20"), Stop.TIP),
    }
    assert committed_offset(previous, ends).shards == {"a": after("30", 4), "b": after("20")}
    with pytest.raises(EndMissing, match="batch 3 of run run1 read shard\\(s\\) a"):
        positions_after(previous, {})


def test_planning_reads_budget_and_new_shards_asks_tip_shards_and_skips_the_rest() -> None:
    shards = [
        Shard("p", ending_sequence_number=50),
        Shard("c1", parent_shard_id="p"),
        Shard("t"),
        Shard("u"),
        Shard("w"),
    ]
    previous = offset(
        4,
        {
            "p": ShardEntry(after("40"), None, 10, True),
            "t": ShardEntry(after("7"), Stop.TIP, 0, False),
            "u": ShardEntry(after("8"), Stop.TIP, 0, False),
            "w": ShardEntry(after("9"), Stop.CUTOFF, 0, False),
        },
        until=1000,
    )
    ends = {"p": PublishedEnd(AT_SHARD_END, Stop.END, 3)}
    front = frontier(previous, ends, shards, until_ms=1000)
    assert front.positions["c1"] == AT_TRIM_HORIZON  # the child is tracked now that the parent ended
    assert front.decisions == {
        "c1": Decision.READ,
        "t": Decision.PROBE,
        "u": Decision.PROBE,
        "w": Decision.WAIT,
    }
    assert front.to_probe == ("t", "u")
    plan = plan_next(front, {"t": True, "u": False}, max_rows=None, per_shard_cap=500, until_ms=1000)
    assert plan is not None and plan.batch == 5 and plan.until_ms == 1000
    assert plan.read_shards == ("c1", "t")
    assert plan.shards["t"] == ShardEntry(after("7"), Stop.TIP, 500, True)
    assert plan.shards["u"] == ShardEntry(after("8"), Stop.TIP, 0, False)
    assert plan.shards["p"] == ShardEntry(AT_SHARD_END, Stop.END, 0, False)
    assert plan_next(front, {}, max_rows=None, per_shard_cap=500, until_ms=1000) is not None  # c1 still
    quiet = frontier(offset(5, {"t": ShardEntry(after("7"), Stop.TIP, 0, False)}), {}, [Shard("t")], None)
    assert plan_next(quiet, {"t": False}, max_rows=None, per_shard_cap=500, until_ms=None) is None


def test_a_row_limit_is_split_over_the_shards_read_and_rotates() -> None:
    shards = [Shard(name) for name in "abc"]
    previous = offset(0, {n: ShardEntry(after("1"), Stop.BUDGET, 0, False) for n in "abc"})
    front = frontier(previous, {}, shards, None)
    plan = plan_next(front, {}, max_rows=2, per_shard_cap=100, until_ms=None)
    assert plan is not None
    assert {s: plan.shards[s].max_rows for s in "abc"} == {"a": 0, "b": 1, "c": 1}  # rotated by batch 1
    assert plan.read_shards == ("b", "c")


# -- the whole loop, simulated ----------------------------------------------------------------------


@dataclass
class SimShard:
    """A shard as a list of (sequence number, arrival ms); closed shards have an end."""

    shard: Shard
    records: list[tuple[int, int]] = field(default_factory=list)

    def after(self, pos: ShardPos) -> list[tuple[int, int]]:
        if pos.is_shard_end:
            return []
        if pos.checkpoint.is_sentinel:
            return list(self.records)
        seq = int(pos.checkpoint.sequence_number)
        return [r for r in self.records if r[0] > seq]


def executor_read(sim: SimShard, entry: ShardEntry, until: int | None) -> tuple[PublishedEnd, list[int]]:
    """The executors' stop rules over a simulated shard."""
    taken: list[int] = []
    cut = False
    for seq, arrived in sim.after(entry.start):
        if until is not None and arrived > until:
            cut = True
            break
        if len(taken) >= entry.max_rows:
            break
        taken.append(seq)
    closed = not sim.shard.is_open
    shard_end = closed and len(taken) == len(sim.after(entry.start)) and not cut
    end = AT_SHARD_END if shard_end else (after(str(taken[-1])) if taken else entry.start)
    reason = end_reason(shard_end=shard_end, rows=len(taken), max_rows=entry.max_rows, cut=cut)
    return PublishedEnd(end, reason, len(taken)), taken


def probe(sim: SimShard, pos: ShardPos, until: int) -> bool:
    """The planner's question: a record after ``pos`` that arrived by the cut-off (or a closed shard
    read to its end, whose read publishes the end)?"""
    rest = sim.after(pos)
    if not rest:
        return not sim.shard.is_open
    return rest[0][1] <= until


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[list[int]], int | None, int, bool]:
    """Per round, how many records arrive on each of 3 shards; the row limit; the per-shard cap; a split."""
    rounds = draw(st.lists(st.lists(st.integers(0, 6), min_size=3, max_size=3), min_size=1, max_size=8))
    max_rows = draw(st.one_of(st.none(), st.integers(1, 12)))
    cap = draw(st.integers(1, 8))
    return rounds, max_rows, cap, draw(st.booleans())


@settings(max_examples=examples(150), deadline=None)
@given(worlds())
def test_every_record_is_delivered_once_parents_first_and_available_now_ends(
    world: tuple[list[list[int]], int | None, int, bool],
) -> None:
    rounds, max_rows, cap, split = world
    sims = {f"s{i}": SimShard(Shard(f"s{i}")) for i in range(3)}
    seq = 0
    clock = 0
    delivered: list[tuple[str, int, int]] = []  # (shard, seq, batch)
    current = first_offset(SourceOffset("s", dict.fromkeys(sims, AT_TRIM_HORIZON)), "run1")
    ends: dict[str, PublishedEnd] = {}
    for index, arrivals in enumerate(rounds):
        for name, count in zip(("s0", "s1", "s2"), arrivals, strict=True):
            for _ in range(count):
                seq += 1
                clock += 1
                target = name
                if name == "s0" and not sims["s0"].shard.is_open:
                    target = "c0"
                sims[target].records.append((seq, clock))
        if split and index == len(rounds) // 2 and sims["s0"].shard.is_open:
            sims["s0"].shard = Shard("s0", ending_sequence_number=seq)
            sims["c0"] = SimShard(Shard("c0", parent_shard_id="s0"))
        until = clock  # an AvailableNow run: everything that arrived so far
        for _ in range(200):
            listing = [sim.shard for sim in sims.values()]
            front = frontier(current, ends, listing, until)
            for shard_id in front.to_probe:
                assert front.last[shard_id] in (Stop.TIP, Stop.CUTOFF)
                assert sims[shard_id].shard.is_open  # closed shards are read, never asked
            news = {s: probe(sims[s], front.positions[s], until) for s in front.to_probe}
            plan = plan_next(front, news, max_rows=max_rows, per_shard_cap=cap, until_ms=until)
            if plan is None:
                break
            assert plan.batch == current.batch + 1
            if max_rows is not None:
                assert sum(plan.shards[s].max_rows for s in plan.read_shards) <= max_rows
            ends = {}
            for shard_id in plan.read_shards:
                published, taken = executor_read(sims[shard_id], plan.shards[shard_id], until)
                assert published.rows <= cap
                ends[shard_id] = published
                delivered.extend((shard_id, s, plan.batch) for s in taken)
            current = plan
        else:
            raise AssertionError("an AvailableNow run did not end")
    everything = sorted((name, s) for name, sim in sims.items() for s, _ in sim.records)
    assert sorted((name, s) for name, s, _ in delivered) == everything  # exactly once, nothing lost
    if "c0" in sims:
        parent = [b for name, _, b in delivered if name == "s0"]
        child = [b for name, _, b in delivered if name == "c0"]
        if parent and child:
            assert max(parent) < min(child)
