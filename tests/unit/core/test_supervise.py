"""after_loop_failure(): backoff for a failed worker loop, and when the worker gives up."""

from __future__ import annotations

import pytest

from kcl_daemon.core.supervise import GiveUp, LoopPolicy, RestartLoop, after_loop_failure

POLICY = LoopPolicy("test", initial_backoff_s=0.5, max_backoff_s=4.0, max_failures=3, window_s=60.0)


@pytest.mark.parametrize(
    ("earlier", "now", "expected"),
    [
        ((), 100.0, RestartLoop(0.5, 1)),
        ((100.0,), 101.0, RestartLoop(1.0, 2)),
        ((100.0, 101.0), 102.0, RestartLoop(2.0, 3)),
        ((100.0, 101.0, 102.0), 103.0, GiveUp(4)),
        ((10.0, 20.0, 30.0), 103.0, RestartLoop(0.5, 1)),  # old failures fall out of the window
        ((50.0, 100.0, 101.0), 103.0, GiveUp(4)),
    ],
)
def test_after_loop_failure(earlier: tuple[float, ...], now: float, expected: RestartLoop | GiveUp) -> None:
    decision, kept = after_loop_failure(POLICY, earlier, now)
    assert decision == expected
    assert kept[-1] == now and all(now - t < POLICY.window_s for t in kept)


def test_the_backoff_is_capped() -> None:
    policy = LoopPolicy("cap", 1.0, 3.0, max_failures=10, window_s=1000.0)
    decision, _ = after_loop_failure(policy, tuple(range(6)), 6.0)
    assert decision == RestartLoop(3.0, 7)
