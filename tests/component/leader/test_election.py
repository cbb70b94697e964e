"""Leader election shell over an in-memory lock table: one leader, stealing a stale lock, stepping down."""

from __future__ import annotations

import itertools
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kcl_daemon.errors import TransientNetwork
from kcl_daemon.leader.election import LeaderElection
from tests.support.clocks import FakeClock
from tests.support.fakes import FakeStore

POOL = ThreadPoolExecutor(1)


def _election(store: FakeStore, worker: str, clock: FakeClock) -> LeaderElection:
    versions = (f"{worker}-{n}" for n in itertools.count())
    return LeaderElection(store, worker, clock, POOL, duration_s=10.0, new_version=lambda: next(versions))


async def test_one_leader_and_a_stale_lock_is_stolen_after_its_duration() -> None:
    store, clock = FakeStore(), FakeClock()
    a, b = _election(store, "a", clock), _election(store, "b", clock)
    assert await a.check_once()
    assert not await b.check_once()
    assert store.items["Leader"]["leaseDuration"] == "10000"
    for _ in range(8):  # a heartbeats every 2.5 s: b never sees a stale lock
        clock.now += 2.5
        assert await a.check_once()
        assert not await b.check_once()
    # a dies; b steals once it has seen the same record version for > 10 s
    first_seen = clock.now
    while not await b.check_once():
        clock.now += 1.0
        assert clock.now - first_seen <= 11.0
    assert store.items["Leader"]["ownerName"] == "b"
    assert not a.is_leader() or not await a.check_once()  # a's heartbeat fails its condition


async def test_a_follower_suspects_a_leader_that_missed_a_heartbeat_and_never_a_live_one() -> None:
    store, clock = FakeStore(), FakeClock()
    a, b = _election(store, "a", clock), _election(store, "b", clock)
    assert not b.leader_suspect(), "the lock was never read"
    assert await a.check_once()
    for _ in range(6):  # heartbeats every 2.5 s, reads every 2.5 s: never suspect
        assert not await b.check_once()
        assert not b.leader_suspect() and not a.leader_suspect()
        clock.now += 2.5
        assert await a.check_once()
    # a dies: two reads of the same record version 2.5 s apart are not yet a missed heartbeat
    assert not await b.check_once()
    clock.now += 2.5
    assert not await b.check_once()
    assert not b.leader_suspect()
    clock.now += 2.5
    assert not await b.check_once()
    assert b.leader_suspect()  # 5 s unchanged > 3/8 of 10 s


class LossyStore(FakeStore):
    """A lock store whose next update, once ``lose_reply`` is set, applies and then fails as if its reply
    were lost (a 500 after the write, a timeout)."""

    lose_reply = False

    def update(self, key: str, sets: Any, *, require_equal: Any) -> None:
        super().update(key, sets, require_equal=require_equal)
        if self.lose_reply:
            self.lose_reply = False
            raise TransientNetwork("connection closed before the reply")


async def test_a_heartbeat_that_applied_but_answered_with_an_error_keeps_the_leader() -> None:
    """The update lands and the reply is lost (a 500 after the write, a timeout): the next heartbeat's
    condition fails; reading the lock shows our own version, so the leader stays leader."""
    store, clock = LossyStore(), FakeClock()
    a, b = _election(store, "a", clock), _election(store, "b", clock)
    changes: list[bool] = []
    a.on_change.append(changes.append)
    assert await a.check_once()
    store.lose_reply = True
    clock.now += 2.5
    assert await a.check_once()  # applied, answered with an error
    clock.now += 2.5
    assert await a.check_once(), "the lock still names a: it must not step down"
    assert changes == [True]
    for _ in range(6):  # and it goes on heartbeating: b never sees a stale lock
        clock.now += 2.5
        assert await a.check_once()
        assert not await b.check_once()


async def test_release_deletes_the_lock_a_heartbeat_answered_with_an_error_had_written() -> None:
    store, clock = LossyStore(), FakeClock()
    a = _election(store, "a", clock)
    assert await a.check_once()
    store.lose_reply = True
    clock.now += 2.5
    assert await a.check_once()  # applied, answered with an error
    await a.release("shutdown")
    assert "Leader" not in store.items, "the lock is deleted, not left to expire"


async def test_an_acquisition_that_applied_but_answered_with_an_error_leads_at_the_next_check() -> None:
    class LossyPutStore(FakeStore):
        lose_reply = True

        def put(self, key: str, attributes: Any, **condition: Any) -> None:
            super().put(key, attributes, **condition)
            if self.lose_reply:
                self.lose_reply = False
                raise TransientNetwork("read timeout")

    store, clock = LossyPutStore(), FakeClock()
    a = _election(store, "a", clock)
    assert not await a.check_once()  # applied, answered with an error
    clock.now += 2.5
    assert await a.check_once(), "its own lock: leading now, not after the lock went stale"


async def test_a_leader_that_cannot_write_steps_down_before_the_lock_can_be_stolen() -> None:
    store, clock = FakeStore(), FakeClock()
    a = _election(store, "a", clock)
    changes: list[bool] = []
    a.on_change.append(changes.append)
    assert await a.check_once()
    store.failing = True
    clock.now += 2.5
    assert await a.check_once()  # one failed heartbeat: still leader for now
    clock.now += 6.5  # 9 s since the last successful heartbeat: within 1 s of being stealable
    assert not a.is_leader()
    assert changes == [True, False]


async def test_release_deletes_our_lock_and_a_java_lock_gets_its_own_duration() -> None:
    store, clock = FakeStore(), FakeClock()
    a = _election(store, "a", clock)
    assert await a.check_once()
    await a.release("shutdown")
    assert "Leader" not in store.items
    store.items["Leader"] = {"ownerName": "java", "recordVersionNumber": "j1", "leaseDuration": "120000"}
    assert not await a.check_once()
    clock.now += 60
    assert not await a.check_once()
    clock.now += 61
    assert await a.check_once()


@pytest.mark.parametrize(
    "item",
    [
        {"ownerName": "x"},
        {"ownerName": "x", "recordVersionNumber": "r", "leaseDuration": "?"},
        {"recordVersionNumber": "r", "leaseDuration": "120000", "entityType": "LEADER"},
    ],
)
async def test_a_malformed_lock_is_taken_over_once_unchanged_for_javas_duration(item: dict[str, Any]) -> None:
    store, clock = FakeStore(), FakeClock()
    store.items["Leader"] = item
    a = _election(store, "a", clock)
    assert not await a.check_once()
    clock.now += 119.0
    assert not await a.check_once()
    clock.now += 2.0
    assert await a.check_once()  # conditional on the record version it saw (or on there being none)
    assert store.items["Leader"]["ownerName"] == "a"


async def test_a_lock_read_that_fails_is_a_warning_and_no_leadership_not_a_crash(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, clock = FakeStore(), FakeClock()
    store.failing = True  # a TransientNetwork (a mapped read timeout) on every call
    election = _election(store, "a", clock)
    assert not await election.check_once()
    assert "cannot read the leader lock" in caplog.text
    store.failing = False
    assert await election.check_once()


class FlakyDeleteStore(FakeStore):
    """A lock store whose deletes fail ``failures`` times: before applying, or (``applied``) after."""

    def __init__(self, failures: int, *, applied: bool) -> None:
        super().__init__()
        self.failures, self.applied, self.deletes = failures, applied, 0

    def delete(self, key: str, *, require_equal: Any) -> None:
        self.deletes += 1
        if self.failures and not self.applied:
            self.failures -= 1
            raise TransientNetwork("connection reset")
        super().delete(key, require_equal=require_equal)
        if self.failures:
            self.failures -= 1
            raise TransientNetwork("connection closed before the reply")


@pytest.mark.parametrize("applied", [False, True], ids=["failed-before-applying", "applied-reply-lost"])
async def test_release_retries_a_delete_that_failed_and_reconciles_one_that_applied(
    applied: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kcl_daemon.leader.election")
    store, clock = FlakyDeleteStore(0, applied=applied), FakeClock()
    a = _election(store, "a", clock)
    assert await a.check_once()
    store.failures = 2
    await a.release("shutdown")
    assert "Leader" not in store.items, "the lock is deleted, not left to expire"
    assert store.deletes == (2 if applied else 3)
    assert "releasing the leader lock failed" not in caplog.text
    assert "leader lock released: shutdown" in caplog.text
