"""The decision after a shard task failed: back off exponentially, park only non-retriable failures."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.lifecycle.checkpoint_validity import unusable_checkpoint
from kcl_daemon.core.lifecycle.restart_policy import Park, Restart, RestartPolicy
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.errors import AwsError, Throttled, TransientNetwork
from kcl_daemon.lifecycle.shard_failures import TaskFailures, decide_after_failure, describe, is_retriable

POLICY = RestartPolicy(initial_backoff_s=0.5, max_backoff_s=8.0, max_consecutive_failures=3)


@pytest.mark.parametrize(
    ("consecutive", "retriable", "expected"),
    [
        (1, False, Restart(0.5, 1)),
        (2, False, Restart(1.0, 2)),
        (3, False, Park(3)),
        (3, True, Restart(2.0, 3)),
        (10, True, Restart(8.0, 10)),
    ],
)
def test_decision_table(consecutive: int, retriable: bool, expected: Restart | Park) -> None:
    assert decide_after_failure(POLICY, TaskFailures(consecutive), retriable) == expected


@given(st.integers(min_value=1, max_value=10_000))
def test_retriable_failures_never_park_and_the_backoff_is_bounded(consecutive: int) -> None:
    decision = decide_after_failure(POLICY, TaskFailures(consecutive), retriable=True)
    assert isinstance(decision, Restart) and 0.5 <= decision.delay_s <= 8.0


def test_errors_are_described_and_classified() -> None:
    assert is_retriable(Throttled("slow down")) and is_retriable(TransientNetwork("reset"))
    assert not is_retriable(AwsError("InvalidArgumentException")) and not is_retriable(ValueError("x"))
    assert describe(ValueError("bad")) == "ValueError: bad"
    failures = TaskFailures().after(KeyError("k")).after(ValueError("v"))
    assert failures.consecutive == 2 and failures.last == "ValueError: v"


@pytest.mark.parametrize(
    ("checkpoint", "problem"),
    [
        (ExtendedSequenceNumber("4" * 5000), "longer than the 129 digits"),
        (ExtendedSequenceNumber("495903", 2**64 + 1), "outside 0..2^63-1"),
        (ExtendedSequenceNumber("495903", 2**63 - 1), None),
        (ExtendedSequenceNumber("TRIM_HORIZON"), None),
    ],
)
def test_unusable_checkpoints_are_named(checkpoint: ExtendedSequenceNumber, problem: str | None) -> None:
    found = unusable_checkpoint(checkpoint)
    assert found == problem if problem is None else (found is not None and problem in found)
    assert found is None or len(found) < 200, "a huge value is shortened"


def test_the_status_line_counts_failures_and_names_parked_and_stalled_shards() -> None:
    from kcl_daemon.worker.scheduler import WorkerStatus

    line = WorkerStatus(held=2, shard_failures=3, parked=["a"], stalled=["b"]).line()
    assert line.endswith("0 child restarts, 3 shard failures, parked: a, stalled: b")
    assert "failures" not in WorkerStatus().line() and "stalled" not in WorkerStatus().line()
