"""What the Java 3.5.1 mixed-fleet tests read from the records file: duplicates, and whether every taker
started at its predecessor's checkpoint (tests.support.java35_fleet)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.java35_fleet import checkpoint_violations, duplicates


def rec(worker: str, t: float, *seqs: int, shard: str = "s0") -> list[dict[str, Any]]:
    """One batch: the recorder stamps every record of a batch with the batch's arrival time."""
    return [
        {"event": "record", "worker": worker, "t": t, "shard": shard, "seq": str(s), "sub": 0} for s in seqs
    ]


def init(worker: str, t: float, seq: str, shard: str = "s0") -> list[dict[str, Any]]:
    return [{"event": "initialize", "worker": worker, "t": t, "shard": shard, "seq": seq}]


def test_duplicates_count_deliveries_beyond_the_first() -> None:
    rows = rec("a", 1.0, 10, 11) + rec("b", 5.0, 11, 12) + rec("b", 6.0, 11, 11, shard="s1")
    assert duplicates(rows) == 2  # 11 on s0 twice; 11 on s1 twice (another shard: another record)


@pytest.mark.parametrize(
    ("start", "problems"),
    [
        ("20", 0),  # the checkpoint after a's second-to-last batch: a's last batch may be redelivered
        ("30", 0),  # a checkpointed its last batch too
        ("10", 1),  # before a checkpointed batch: records a had checkpointed delivered again
        ("TRIM_HORIZON", 1),  # started over
    ],
)
def test_a_taker_starts_at_its_predecessors_checkpoint(start: str, problems: int) -> None:
    rows = init("a", 0.5, "TRIM_HORIZON") + rec("a", 1.0, 10) + rec("a", 2.0, 20) + rec("a", 3.0, 30)
    rows += init("b", 4.0, start) + rec("b", 5.0, 40)
    assert len(checkpoint_violations(rows)) == problems


def test_the_first_owner_and_a_worker_taking_back_its_own_shard_are_not_takers() -> None:
    rows = init("a", 0.5, "TRIM_HORIZON") + rec("a", 1.0, 10) + init("a", 2.0, "TRIM_HORIZON")
    assert checkpoint_violations(rows) == []
