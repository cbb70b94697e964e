"""Per-lease throughput for the ``throughputKBps`` attribute, as Java does (contract §3.2, §5.4).

At each renewal: KB delivered to the record processor since the previous renewal, divided by the
seconds between the two, folded into an exponential moving average (alpha 0.5) with the previous value.
The byte counts come from a callable (the shard task's consumer statistics); a counter that went back
(the consumer was restarted) counts from zero again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

ALPHA = 0.5


@dataclass(slots=True)
class _State:
    bytes_seen: int
    at: float
    kbps: float | None = None


class ThroughputTracker:
    def __init__(
        self, bytes_of: Callable[[str], int | None], monotonic: Callable[[], float], alpha: float = ALPHA
    ) -> None:
        self._bytes_of = bytes_of
        self._monotonic = monotonic
        self._alpha = alpha
        self._state: dict[str, _State] = {}

    def on_renew(self, lease_key: str) -> float | None:
        """The EMA to write with this renewal; None until two renewals have been seen."""
        total = self._bytes_of(lease_key)
        now = self._monotonic()
        if total is None:
            return self._state[lease_key].kbps if lease_key in self._state else None
        state = self._state.get(lease_key)
        if state is None:
            self._state[lease_key] = _State(total, now)
            return None
        elapsed = now - state.at
        if elapsed <= 0:
            return state.kbps
        delta = total - state.bytes_seen if total >= state.bytes_seen else total
        current = delta / 1024.0 / elapsed
        state.kbps = current if state.kbps is None else self._alpha * current + (1 - self._alpha) * state.kbps
        state.bytes_seen, state.at = total, now
        return state.kbps

    def forget(self, lease_key: str) -> None:
        self._state.pop(lease_key, None)
