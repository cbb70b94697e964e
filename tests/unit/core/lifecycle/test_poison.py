"""The poison-record decisions: what counts as a failed delivery, and the bisection plan."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.lifecycle.poison import (
    Bisection,
    FailureKind,
    Isolated,
    PoisonPolicy,
    delivery_failed,
    reports_swallowed_exception,
)


@pytest.mark.parametrize(
    ("policy", "kind", "failed"),
    [
        (PoisonPolicy.RETRY, FailureKind.EXCEPTION, False),  # today's behaviour: the batch is done
        (PoisonPolicy.SKIP, FailureKind.EXCEPTION, True),
        (PoisonPolicy.DEAD_LETTER, FailureKind.EXCEPTION, True),
        (PoisonPolicy.RETRY, FailureKind.EXIT, True),
        (PoisonPolicy.RETRY, FailureKind.TIMEOUT, True),
        (PoisonPolicy.DEAD_LETTER, FailureKind.TIMEOUT, True),
    ],
)
def test_which_deliveries_fail(policy: PoisonPolicy, kind: FailureKind, failed: bool) -> None:
    assert delivery_failed(policy, kind) is failed


@pytest.mark.parametrize(
    ("line", "swallowed"),
    [
        ("Caught exception from action dispatch: boom", True),
        ("Traceback (most recent call last):", False),
        ("processing record 17", False),
    ],
)
def test_swallowed_exception_lines(line: str, swallowed: bool) -> None:
    assert reports_swallowed_exception(line) is swallowed


def test_a_batch_that_answers_at_once_is_done() -> None:
    plan = Bisection.start(100, 3)
    assert plan.next_span() == (0, 100)
    plan = plan.after_success()
    assert plan.done and plan.next_span() is None


def test_the_whole_batch_is_retried_before_it_is_split() -> None:
    plan = Bisection.start(8, 3)
    plan, isolated = plan.after_failure()
    assert (plan.next_span(), isolated, plan.restart_attempt()) == ((0, 8), None, 1)
    plan, _ = plan.after_failure()
    assert (plan.next_span(), plan.restart_attempt()) == ((0, 8), 2)
    plan, _ = plan.after_failure()
    assert plan.pending == ((0, 4), (4, 8)) and plan.splitting and plan.restart_attempt() == 0


def test_a_transient_failure_is_not_split() -> None:
    plan, _ = Bisection.start(8, 3).after_failure()
    plan = plan.after_success()
    assert plan.done


def test_a_single_record_batch_is_isolated_after_max_attempts() -> None:
    plan = Bisection.start(1, 3)
    for _ in range(2):
        plan, isolated = plan.after_failure()
        assert isolated is None
    plan, isolated = plan.after_failure()
    assert isolated == Isolated(0, 3) and plan.done


@pytest.mark.parametrize(("size", "attempts"), [(0, 3), (5, 0)])
def test_nothing_to_plan_is_refused(size: int, attempts: int) -> None:
    with pytest.raises(ValueError, match="cannot be planned"):
        Bisection.start(size, attempts)


def test_a_processor_that_fails_on_everything_is_broken_not_poisoned() -> None:
    plan = Bisection.start(8, 1)
    isolated = []
    while not plan.broken and plan.next_span() is not None:
        plan, out = plan.after_failure()
        if out is not None:
            isolated.append(out.index)
    assert plan.broken and isolated == [0, 1, 2]


def test_records_isolated_after_an_answer_are_poison() -> None:
    plan = Bisection.start(4, 1)
    plan, _ = plan.after_failure()  # split: (0,2), (2,4)
    plan = plan.after_success()  # (0,2) answered
    for _ in range(5):
        if plan.next_span() is None:
            break
        plan, _ = plan.after_failure()
    assert plan.done and plan.isolated == 2 and not plan.broken


def simulate(
    size: int, poison: frozenset[int], max_attempts: int
) -> tuple[list[list[int]], list[Isolated], int]:
    """A processor that fails every delivery holding a poison record: (answered deliveries, isolated,
    failed deliveries)."""
    plan = Bisection.start(size, max_attempts)
    answered: list[list[int]] = []
    isolated: list[Isolated] = []
    failures = 0
    while (span := plan.next_span()) is not None:
        indices = list(range(*span))
        if poison.intersection(indices):
            failures += 1
            plan, out = plan.after_failure()
            if out is not None:
                isolated.append(out)
        else:
            answered.append(indices)
            plan = plan.after_success()
    return answered, isolated, failures


@given(
    st.integers(1, 200).flatmap(
        lambda size: st.tuples(
            st.just(size), st.frozensets(st.integers(0, size - 1), max_size=6), st.integers(1, 5)
        )
    )
)
def test_bisection_delivers_every_good_record_once_in_order_and_isolates_exactly_the_poison(
    case: tuple[int, frozenset[int], int],
) -> None:
    size, poison, max_attempts = case
    answered, isolated, failures = simulate(size, poison, max_attempts)
    # (the shell gives up on a plan that is ``broken``; this checks the plan itself, which goes on)
    delivered = [i for batch in answered for i in batch]
    assert delivered == [i for i in range(size) if i not in poison]  # each once, in order
    assert [i.index for i in isolated] == sorted(poison)
    # bounded: the whole batch's attempts, then at most one failing span per level per poison record
    levels = size.bit_length()
    assert failures <= max_attempts + len(poison) * (levels + 1)
    for out in isolated:
        assert out.attempts >= 1


@given(st.integers(1, 200), st.integers(1, 5))
def test_a_healthy_batch_is_delivered_once_whole(size: int, max_attempts: int) -> None:
    answered, isolated, failures = simulate(size, frozenset(), max_attempts)
    assert answered == [list(range(size))] and not isolated and failures == 0
