"""Spacing between GetRecords calls: idle time, the 0.2 s floor, and reduced TPS near the tip."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.shards.read_pacing import (
    MIN_IDLE_BETWEEN_READS_S,
    effective_idle_s,
    read_interval_s,
    seconds_until_next_read,
)


@pytest.mark.parametrize(("configured", "effective"), [(0.0, 0.2), (0.1, 0.2), (0.2, 0.2), (1.5, 1.5)])
def test_effective_idle(configured: float, effective: float) -> None:
    assert effective_idle_s(configured) == effective


@pytest.mark.parametrize(
    ("idle", "threshold", "behind", "interval"),
    [
        (1.5, 0.0, 0, 1.5),  # feature off
        (0.05, 0.0, None, 0.2),  # floor
        (1.0, 3.0, 2999, 3.0),  # near the tip: slow down
        (1.0, 3.0, 3000, 1.0),  # not below the threshold
        (1.0, 3.0, None, 1.0),  # no millisBehindLatest yet
        (5.0, 3.0, 0, 5.0),  # idle already longer
    ],
)
def test_read_interval(idle: float, threshold: float, behind: int | None, interval: float) -> None:
    assert (
        read_interval_s(idle, reduced_tps_threshold_s=threshold, last_millis_behind_latest=behind) == interval
    )


@pytest.mark.parametrize(
    ("now", "last", "interval", "wait"),
    [
        (10.0, None, 1.5, 0.0),
        (10.0, 9.0, 1.5, 0.5),
        (10.0, 8.0, 1.5, 0.0),
        (10.0, 9.95, 0.0, 0.15),  # even a zero interval keeps 0.2 s between call starts
    ],
)
def test_seconds_until_next_read(now: float, last: float | None, interval: float, wait: float) -> None:
    assert seconds_until_next_read(now, last, interval) == pytest.approx(wait)


@given(
    st.lists(st.floats(0, 10), min_size=1, max_size=30),
    st.floats(0, 3),
)
def test_never_more_than_five_calls_per_second(gaps: list[float], idle: float) -> None:
    """Whatever the caller's own delays, the starts of consecutive calls are >= 0.2 s apart."""
    now, last, starts = 0.0, None, []
    for gap in gaps:
        now += gap
        now += seconds_until_next_read(now, last, read_interval_s(idle))
        starts.append(now)
        last = now
    assert all(b - a >= MIN_IDLE_BETWEEN_READS_S - 1e-9 for a, b in itertools.pairwise(starts))
