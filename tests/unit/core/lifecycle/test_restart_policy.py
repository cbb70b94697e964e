"""Restart backoff and parking: no endless crash loop, even behind re-delivered records."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.lifecycle.restart_policy import (
    FailureHistory,
    Park,
    Restart,
    RestartPolicy,
    decide_restart,
)
from kcl_daemon.core.sequence import ExtendedSequenceNumber as E

POLICY = RestartPolicy(initial_backoff_s=1.0, max_backoff_s=10.0, multiplier=2.0, max_consecutive_failures=4)


def test_backoff_doubles_and_is_capped() -> None:
    assert [POLICY.backoff_s(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_parks_after_max_consecutive_failures() -> None:
    history = FailureHistory()
    decisions = []
    for _ in range(4):
        history = history.after_failure(E("500"))
        decisions.append(decide_restart(POLICY, history))
    assert decisions[:3] == [Restart(1.0, 1), Restart(2.0, 2), Restart(4.0, 3)]
    assert decisions[3] == Park(4)


def test_redelivered_records_before_the_failure_do_not_reset_the_count() -> None:
    history = FailureHistory().after_failure(E("500"))
    history = history.after_progress(E("300"))  # re-delivery from an older checkpoint succeeded
    assert history.consecutive == 1
    history = history.after_progress(E("500"))  # the failing batch itself now went through
    assert history == FailureHistory()


def test_initialize_failures_reset_on_any_progress() -> None:
    history = FailureHistory().after_failure(None).after_failure(None)
    assert history.after_progress(E("1")) == FailureHistory()


@given(st.lists(st.integers(1, 1000), min_size=1, max_size=30))
def test_a_poison_batch_parks_within_the_limit(progress_before_failure: list[int]) -> None:
    """However the re-delivered batches before it are cut, a batch that always fails parks the shard."""
    poison = E("2000")
    history = FailureHistory()
    for attempt, upto in enumerate(progress_before_failure, start=1):
        history = history.after_progress(E(str(upto)))
        history = history.after_failure(poison)
        if isinstance(decide_restart(POLICY, history), Park):
            assert attempt == POLICY.max_consecutive_failures
            return
    assert len(progress_before_failure) < POLICY.max_consecutive_failures
