"""When a failed child is restarted, and when its shard is parked instead.

A child that fails is restarted after an exponential backoff (``initial x multiplier^(n-1)``, capped).
Failures count as *consecutive* until the shard makes progress past the place where the last failure
happened: re-delivering records that were already processed does not reset the count, so a poison
batch behind a rarely-checkpointing processor cannot cause an endless crash loop. After
``max_consecutive_failures`` the shard is parked.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcl_daemon.core.sequence import ExtendedSequenceNumber


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    initial_backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    multiplier: float = 2.0
    max_consecutive_failures: int = 5

    def backoff_s(self, consecutive_failures: int) -> float:
        exponent = min(max(consecutive_failures - 1, 0), 64)  # past the cap anyway; no float overflow
        return float(min(self.initial_backoff_s * self.multiplier**exponent, self.max_backoff_s))


@dataclass(frozen=True, slots=True)
class Restart:
    delay_s: float
    consecutive_failures: int


@dataclass(frozen=True, slots=True)
class Park:
    consecutive_failures: int


@dataclass(frozen=True, slots=True)
class FailureHistory:
    """Consecutive failures, and the furthest record that was in flight when one happened."""

    consecutive: int = 0
    high_water: ExtendedSequenceNumber | None = None

    def after_failure(self, in_flight_up_to: ExtendedSequenceNumber | None) -> FailureHistory:
        high = self.high_water
        if in_flight_up_to is not None and (high is None or in_flight_up_to > high):
            high = in_flight_up_to
        return FailureHistory(self.consecutive + 1, high)

    def after_progress(self, completed_up_to: ExtendedSequenceNumber | None) -> FailureHistory:
        """A batch ending at ``completed_up_to`` was processed; forget failures it has moved past."""
        if self.consecutive == 0:
            return self
        if self.high_water is None or (completed_up_to is not None and completed_up_to >= self.high_water):
            return FailureHistory()
        return self


def decide_restart(policy: RestartPolicy, history: FailureHistory) -> Restart | Park:
    if history.consecutive >= policy.max_consecutive_failures:
        return Park(history.consecutive)
    return Restart(policy.backoff_s(history.consecutive), history.consecutive)
