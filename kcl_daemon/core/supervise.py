"""When a failed background loop of the daemon itself is restarted, and when the worker gives up.

The renewer, the taker, shard sync, cleanup and the status line run for the whole life of the worker;
one that fails is restarted after a growing backoff (``initial x 2^(n-1)``, capped), where ``n`` counts
the failures within the last ``window_s``. More than ``max_failures`` failures in that window escalate:
the worker stops cleanly and exits non-zero, so a supervisor can act, instead of limping on without
the loop (a worker without its renewer would keep processing shards others have taken over).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class LoopPolicy:
    name: str
    initial_backoff_s: float
    max_backoff_s: float
    max_failures: int
    window_s: float


#: Every long-running loop of the worker (renewer, taker, shard sync, cleanup, status).
WORKER_LOOP: Final = LoopPolicy(
    "worker_loop", initial_backoff_s=0.5, max_backoff_s=30.0, max_failures=5, window_s=300.0
)


@dataclass(frozen=True, slots=True)
class RestartLoop:
    delay_s: float
    failures_in_window: int


@dataclass(frozen=True, slots=True)
class GiveUp:
    failures_in_window: int


def after_loop_failure(
    policy: LoopPolicy, earlier_failures: Sequence[float], now: float
) -> tuple[RestartLoop | GiveUp, tuple[float, ...]]:
    """The decision after a failure at ``now``, and the failure times to keep for the next one."""
    recent = (*(t for t in earlier_failures if now - t < policy.window_s), now)
    count = len(recent)
    if count > policy.max_failures:
        return GiveUp(count), recent
    delay = min(policy.initial_backoff_s * 2 ** (count - 1), policy.max_backoff_s)
    return RestartLoop(delay, count), recent
