"""Iterator positions for checkpoints, refresh after expiry, and dropping records up to a checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.sequence import (
    AT_TIMESTAMP,
    LATEST,
    SHARD_END,
    TRIM_HORIZON,
    ExtendedSequenceNumber,
)
from kcl_daemon.core.shards.iterator import (
    IteratorPosition,
    IteratorType,
    NothingToRead,
    iterator_position_for,
    records_after,
    refresh_position,
)

WHEN = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Rec:
    sequence_number: str
    sub_sequence_number: int = 0


@pytest.mark.parametrize(
    ("checkpoint", "expected"),
    [
        (TRIM_HORIZON, IteratorPosition(IteratorType.TRIM_HORIZON)),
        (LATEST, IteratorPosition(IteratorType.LATEST)),
        (AT_TIMESTAMP, IteratorPosition(IteratorType.AT_TIMESTAMP, timestamp=WHEN)),
        (ExtendedSequenceNumber("42"), IteratorPosition(IteratorType.AT_SEQUENCE_NUMBER, "42")),
        # Inside an aggregate: read the aggregate again, drop sub-records 0..3 afterwards.
        (ExtendedSequenceNumber("42", 3), IteratorPosition(IteratorType.AT_SEQUENCE_NUMBER, "42")),
    ],
)
def test_position_for_checkpoint(checkpoint: ExtendedSequenceNumber, expected: IteratorPosition) -> None:
    assert iterator_position_for(checkpoint, timestamp=WHEN) == expected


def test_shard_end_has_nothing_to_read() -> None:
    with pytest.raises(NothingToRead):
        iterator_position_for(SHARD_END)


def test_at_timestamp_needs_the_configured_instant() -> None:
    with pytest.raises(ValueError, match="timestamp"):
        iterator_position_for(AT_TIMESTAMP)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"type": IteratorType.AT_SEQUENCE_NUMBER}, "needs sequence"),
        ({"type": IteratorType.LATEST, "sequence_number": "1"}, "takes no sequence"),
        ({"type": IteratorType.AT_TIMESTAMP}, "needs timestamp"),
        ({"type": IteratorType.AT_TIMESTAMP, "timestamp": datetime(2024, 1, 1)}, "timezone"),  # noqa: DTZ001
        ({"type": IteratorType.TRIM_HORIZON, "timestamp": WHEN}, "takes no timestamp"),
    ],
)
def test_invalid_positions(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        IteratorPosition(**kwargs)  # type: ignore[arg-type]


def test_position_str() -> None:
    assert str(IteratorPosition(IteratorType.AFTER_SEQUENCE_NUMBER, "7")) == "AFTER_SEQUENCE_NUMBER 7"
    assert str(IteratorPosition(IteratorType.LATEST)) == "LATEST"
    assert "2024-05-01" in str(IteratorPosition(IteratorType.AT_TIMESTAMP, timestamp=WHEN))


@pytest.mark.parametrize(
    ("last_fetched", "start", "expected"),
    [
        (None, IteratorPosition(IteratorType.LATEST), IteratorPosition(IteratorType.LATEST)),
        (
            None,
            IteratorPosition(IteratorType.AT_SEQUENCE_NUMBER, "5"),
            IteratorPosition(IteratorType.AT_SEQUENCE_NUMBER, "5"),
        ),
        (
            "9",
            IteratorPosition(IteratorType.AT_SEQUENCE_NUMBER, "5"),
            IteratorPosition(IteratorType.AFTER_SEQUENCE_NUMBER, "9"),
        ),
        (
            "9",
            IteratorPosition(IteratorType.TRIM_HORIZON),
            IteratorPosition(IteratorType.AFTER_SEQUENCE_NUMBER, "9"),
        ),
    ],
)
def test_refresh_position(
    last_fetched: str | None, start: IteratorPosition, expected: IteratorPosition
) -> None:
    assert refresh_position(last_fetched, start) == expected


@pytest.mark.parametrize(
    ("after", "kept"),
    [
        (TRIM_HORIZON, ["9/0", "10/0", "10/1", "10/2", "11/0"]),
        (LATEST, ["9/0", "10/0", "10/1", "10/2", "11/0"]),
        (ExtendedSequenceNumber("9"), ["10/0", "10/1", "10/2", "11/0"]),
        (ExtendedSequenceNumber("10", 0), ["10/1", "10/2", "11/0"]),  # inside an aggregate
        (ExtendedSequenceNumber("10", 1), ["10/2", "11/0"]),
        (ExtendedSequenceNumber("10", 2), ["11/0"]),
        (ExtendedSequenceNumber("11"), []),
        (SHARD_END, []),
    ],
)
def test_records_after(after: ExtendedSequenceNumber, kept: list[str]) -> None:
    # "9" < "10" numerically even though not as strings (moto's sequence numbers).
    records = [Rec("9"), Rec("10", 0), Rec("10", 1), Rec("10", 2), Rec("11")]
    assert [f"{r.sequence_number}/{r.sub_sequence_number}" for r in records_after(records, after)] == kept


keys = st.tuples(st.integers(0, 50), st.integers(0, 5))


@given(st.lists(keys, unique=True).map(sorted), keys)
def test_records_after_keeps_exactly_the_later_records(
    sorted_keys: list[tuple[int, int]], after: tuple[int, int]
) -> None:
    records = [Rec(str(seq), sub) for seq, sub in sorted_keys]
    checkpoint = ExtendedSequenceNumber(str(after[0]), after[1])
    kept = records_after(records, checkpoint)
    assert [(int(r.sequence_number), r.sub_sequence_number) for r in kept] == [
        k for k in sorted_keys if k > after
    ]
