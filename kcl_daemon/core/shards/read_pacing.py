"""How long a shard's reader waits before its next GetRecords call (contract §7).

* Calls start at least ``idleTimeBetweenReadsInMillis`` apart; values below 0.2 s are raised to 0.2 s,
  so a shard never sees more than 5 GetRecords calls per second (the service's per-shard limit) - not
  even while retrying after throttling.
* ``millisBehindLatestThresholdForReducedTps``: when the last response's ``millisBehindLatest`` was
  below the threshold, calls are at least the threshold apart (the reader is near the tip, so fewer
  calls lose nothing).

The polling reader counts ``idleTimeBetweenReadsInMillis`` from the end of the last successful call,
as Java does (an idle shard then makes no more calls than Java's), and the 0.2 s floor between call
*starts*; both on a monotonic clock. Pure.
"""

from __future__ import annotations

from typing import Final

MIN_IDLE_BETWEEN_READS_S: Final = 0.2


def effective_idle_s(configured_s: float) -> float:
    """``idleTimeBetweenReadsInMillis`` as the reader applies it: never below 0.2 s."""
    return max(configured_s, MIN_IDLE_BETWEEN_READS_S)


def read_interval_s(
    idle_s: float, *, reduced_tps_threshold_s: float = 0.0, last_millis_behind_latest: int | None = None
) -> float:
    """The minimum spacing between the starts of two consecutive reads."""
    interval = effective_idle_s(idle_s)
    if (
        reduced_tps_threshold_s > 0
        and last_millis_behind_latest is not None
        and last_millis_behind_latest < reduced_tps_threshold_s * 1000
    ):
        interval = max(interval, reduced_tps_threshold_s)
    return interval


def seconds_until_next_read(now: float, last_call_started: float | None, interval_s: float) -> float:
    """How long to wait so that the next call starts ``interval_s`` after the last one (0 if no call yet).

    ``interval_s`` below 0.2 s counts as 0.2 s.
    """
    if last_call_started is None:
        return 0.0
    return max(0.0, last_call_started + max(interval_s, MIN_IDLE_BETWEEN_READS_S) - now)
