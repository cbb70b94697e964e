"""Checkpoint validation against what was delivered, with the Java error names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.lifecycle.checkpoint_rules import (
    AlreadyCheckpointed,
    CheckpointBounds,
    RefuseCheckpoint,
    WriteCheckpoint,
    decide_checkpoint,
)
from kcl_daemon.core.sequence import SHARD_END, TRIM_HORIZON, ExtendedSequenceNumber

E = ExtendedSequenceNumber
PROCESSING = CheckpointBounds(last_checkpoint=E("100"), largest_permitted=E("200", 3))
ENDING = CheckpointBounds(E("100"), SHARD_END, at_shard_end=True, last_record_of_shard=E("200", 3))
FRESH = CheckpointBounds(TRIM_HORIZON, E("50"))

CASES = [
    # (bounds, seq, sub, expected)
    (PROCESSING, None, None, WriteCheckpoint(E("200", 3))),
    (PROCESSING, "150", None, WriteCheckpoint(E("150"))),
    (PROCESSING, "200", 3, WriteCheckpoint(E("200", 3))),
    (PROCESSING, "200", 4, RefuseCheckpoint("IllegalArgumentException", "")),
    (PROCESSING, "201", None, RefuseCheckpoint("IllegalArgumentException", "")),
    (PROCESSING, "99", None, RefuseCheckpoint("IllegalArgumentException", "")),
    (PROCESSING, "100", None, AlreadyCheckpointed(E("100"))),
    (PROCESSING, "not-a-number", None, RefuseCheckpoint("IllegalArgumentException", "")),
    (PROCESSING, "150", -1, RefuseCheckpoint("IllegalArgumentException", "")),
    (PROCESSING, "SHARD_END", None, RefuseCheckpoint("IllegalArgumentException", "")),
    (PROCESSING, "TRIM_HORIZON", None, RefuseCheckpoint("IllegalArgumentException", "")),
    (ENDING, None, None, WriteCheckpoint(SHARD_END)),
    (ENDING, "200", 3, WriteCheckpoint(SHARD_END)),  # the very last record means SHARD_END
    (ENDING, "150", None, WriteCheckpoint(E("150"))),
    (ENDING, "SHARD_END", None, WriteCheckpoint(SHARD_END)),
    (FRESH, None, None, WriteCheckpoint(E("50"))),
    (FRESH, "9", None, WriteCheckpoint(E("9"))),  # numbers compare as numbers: 9 < 50
    (FRESH, "TRIM_HORIZON", None, AlreadyCheckpointed(TRIM_HORIZON)),
    (CheckpointBounds(E("7"), E("7")), None, None, AlreadyCheckpointed(E("7"))),
]


@pytest.mark.parametrize(("bounds", "seq", "sub", "expected"), CASES)
def test_decide_checkpoint(
    bounds: CheckpointBounds, seq: str | None, sub: int | None, expected: object
) -> None:
    decision = decide_checkpoint(seq, sub, bounds)
    if isinstance(expected, RefuseCheckpoint):
        assert isinstance(decision, RefuseCheckpoint)
        assert decision.java_name == expected.java_name
        assert decision.reason
    else:
        assert decision == expected


positions = st.builds(E, st.integers(1, 10**30).map(str), st.integers(0, 5))


@given(positions, positions, positions)
def test_a_written_checkpoint_always_lies_within_bounds(a: E, b: E, target: E) -> None:
    low, high = min(a, b), max(a, b)
    decision = decide_checkpoint(
        target.sequence_number, target.sub_sequence_number, CheckpointBounds(low, high)
    )
    if isinstance(decision, WriteCheckpoint):
        assert low < decision.target <= high
    elif isinstance(decision, AlreadyCheckpointed):
        assert decision.target == low
    else:
        assert target < low or target > high
