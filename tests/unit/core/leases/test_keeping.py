"""The lease-keeping decisions (kcl_daemon.core.leases.keeping): tables of cases, then a simulated table with
lost replies, throttles, hedged attempts and a thief, checked by Hypothesis for safety and liveness."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcl_daemon.core.leases import keeping
from kcl_daemon.core.leases.expiry import held_lease_deadline
from kcl_daemon.core.leases.keeping import (
    NEVER,
    Action,
    Answer,
    Ask,
    Confirmed,
    Done,
    Failed,
    Failure,
    KeepTimings,
    Kept,
    Lost,
    Op,
    Outcome,
    Released,
    RenewNow,
    Request,
    Send,
    Tick,
    deliver_until,
    give_up_at,
    next_wake,
    outstanding,
    start,
    step,
)
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import TRIM_HORIZON, ExtendedSequenceNumber
from tests.support.hypothesis_profiles import examples

ME = "me"
L = 3.0
T = KeepTimings.for_failover(L)  # renew every 0.975 s, hedge after 0.25 s, give up 3 s past the deadline
LEASE = Lease("shardId-000000000000", TRIM_HORIZON, lease_owner=ME, lease_counter=5)


def _sends(actions: tuple[Action, ...]) -> list[Send]:
    return [a for a in actions if isinstance(a, Send)]


def _held(at: float = 0.0) -> Kept:
    return start(LEASE, at, ME)


# -- tables ------------------------------------------------------------------------------------------


def test_a_renewal_is_due_every_period_and_confirms_with_its_send_time() -> None:
    kept = _held()
    assert not _sends(step(kept, Tick(), 0.9, T).actions)
    stepped = step(kept, Tick(), 1.0, T)
    [send] = _sends(stepped.actions)
    assert send.op is Op.RENEW and send.lease.lease_counter == 5
    assert stepped.kept is not None
    answer = Answer(send.attempt_id, Outcome.WRITTEN, replace(LEASE, lease_counter=6))
    done = step(stepped.kept, answer, 1.2, T)
    assert done.kept is not None and done.kept.confirmed_at == 1.0  # the send time, not the answer's
    assert Confirmed(done.kept.lease, held_lease_deadline(1.0, L)) in done.actions


@pytest.mark.parametrize(
    ("outcome", "next_op", "after_s"),
    [
        (
            Outcome.UNKNOWN,
            Op.RENEW,
            0.0,
        ),  # may have applied: send again at once (fenced: at most one applies)
        (Outcome.THROTTLED, Op.RENEW, 0.05),  # rejected unapplied: a short backoff
        (Outcome.MISSING, Op.RENEW, 0.5),
        (Outcome.CONFLICT, Op.READ, 0.0),  # ours applied, or someone else's: read
    ],
)
def test_after_a_failed_attempt_the_next_one_follows_at_once_or_after_a_short_backoff(
    outcome: Outcome, next_op: Op, after_s: float
) -> None:
    stepped = step(_held(), Tick(), 1.0, T)
    [send] = _sends(stepped.actions)
    assert stepped.kept is not None
    failed = step(stepped.kept, Answer(send.attempt_id, outcome, error="x"), 1.1, T)
    assert failed.kept is not None
    assert not _sends(failed.actions) or after_s == 0.0
    later = step(failed.kept, Tick(), 1.1 + after_s, T)
    resent = _sends(failed.actions) or _sends(later.actions)
    assert [s.op for s in resent] == [next_op]


def test_an_unanswered_attempt_gets_one_hedged_twin_and_no_more() -> None:
    stepped = step(_held(), Tick(), 1.0, T)
    assert stepped.kept is not None
    assert not _sends(step(stepped.kept, Tick(), 1.2, T).actions)
    hedged = step(stepped.kept, Tick(), 1.25, T)
    [twin] = _sends(hedged.actions)
    assert twin.op is Op.RENEW and twin.lease.lease_counter == 5
    assert hedged.kept is not None and len(outstanding(hedged.kept)) == 2
    assert not _sends(step(hedged.kept, Tick(), 2.5, T).actions), "two in flight at most"


@pytest.mark.parametrize(
    ("seen", "verdict"),
    [
        (replace(LEASE, lease_counter=6), "applied"),
        (replace(LEASE, lease_counter=6, lease_owner="new", checkpoint_owner=ME), "applied"),  # hand-off
        (replace(LEASE, lease_counter=5), "not applied"),
        (replace(LEASE, lease_counter=5, lease_owner="new", checkpoint_owner=ME), "not applied"),
        (replace(LEASE, lease_counter=6, lease_owner="thief"), "lost"),
        (replace(LEASE, lease_counter=6, lease_owner=None), "lost"),
        (None, "lost"),
    ],
)
def test_a_read_after_a_condition_failure_decides(seen: Lease | None, verdict: str) -> None:
    kept = step(_held(), Tick(), 1.0, T).kept
    assert kept is not None
    first = outstanding(kept)[0]
    lost_reply = step(kept, Answer(first.attempt_id, Outcome.UNKNOWN, error="read timeout"), 1.5, T)
    [again] = _sends(lost_reply.actions)  # sent at once, fenced on the same counter
    assert again.op is Op.RENEW and again.lease.lease_counter == 5 and lost_reply.kept is not None
    conflict = step(lost_reply.kept, Answer(again.attempt_id, Outcome.CONFLICT, error="condition"), 1.6, T)
    [read] = _sends(conflict.actions)
    assert read.op is Op.READ and conflict.kept is not None
    judged = step(conflict.kept, Answer(read.attempt_id, Outcome.SEEN, seen), 1.7, T)
    if verdict == "applied":
        assert judged.kept is not None and judged.kept.lease == seen
        assert judged.kept.confirmed_at == 1.0, "the earliest send whose outcome was unknown"
    elif verdict == "not applied":
        assert [s.op for s in _sends(judged.actions)] == [Op.RENEW]
    else:
        assert judged.kept is None and any(isinstance(a, Lost) for a in judged.actions)


def test_past_the_deadline_deliveries_stop_but_the_lease_is_kept_until_someone_else_has_it() -> None:
    kept: Kept | None = _held()
    now = 0.0
    while kept is not None and now < give_up_at(_held(), T) - 0.01:  # every attempt gets no answer
        stepped = step(kept, Tick(), now, T)
        kept = stepped.kept
        for send in _sends(stepped.actions):
            assert kept is not None
            kept = step(kept, Answer(send.attempt_id, Outcome.UNKNOWN, error="timeout"), now, T).kept
        now += 0.05
    assert kept is not None, "not given up before the give-up time"
    assert deliver_until(kept, T) == held_lease_deadline(0.0, L) < now
    final = step(kept, Tick(), give_up_at(kept, T), T)
    assert final.kept is None and any(isinstance(a, Lost) for a in final.actions)


def test_a_write_that_lands_after_the_deadline_makes_the_lease_deliverable_again() -> None:
    kept = step(_held(), Tick(), 2.8, T).kept  # the renewal is sent late (past 2.7 s)
    assert kept is not None and deliver_until(kept, T) < 2.8
    [attempt] = outstanding(kept)
    answered = step(
        kept, Answer(attempt.attempt_id, Outcome.WRITTEN, replace(LEASE, lease_counter=6)), 2.9, T
    )
    assert answered.kept is not None and deliver_until(answered.kept, T) == held_lease_deadline(2.8, L)


def test_an_adopted_lease_delivers_nothing_until_its_first_renewal_is_confirmed() -> None:
    kept = start(LEASE, 10.0, ME, validated=False)
    assert deliver_until(kept, T) == NEVER and next_wake(kept, T) == NEVER
    stepped = step(kept, Tick(), 10.0, T)
    [send] = _sends(stepped.actions)
    assert stepped.kept is not None
    done = step(
        stepped.kept, Answer(send.attempt_id, Outcome.WRITTEN, replace(LEASE, lease_counter=6)), 10.1, T
    )
    assert done.kept is not None and deliver_until(done.kept, T) == held_lease_deadline(10.0, L)


def test_a_checkpoint_waits_for_the_renewal_in_progress_then_fences_on_its_counter() -> None:
    kept = step(_held(), Tick(), 1.0, T).kept
    assert kept is not None
    [renewal] = outstanding(kept)
    target = ExtendedSequenceNumber("42")
    asked = step(kept, Ask(Request(7, Op.CHECKPOINT, 1.01, target)), 1.01, T)
    assert not _sends(asked.actions) and asked.kept is not None
    renewed = replace(LEASE, lease_counter=6)
    stepped = step(asked.kept, Answer(renewal.attempt_id, Outcome.WRITTEN, renewed), 1.02, T)
    [send] = _sends(stepped.actions)
    assert send.op is Op.CHECKPOINT and send.lease.lease_counter == 6 and send.checkpoint == target
    assert stepped.kept is not None
    written = replace(renewed, lease_counter=7, checkpoint=target)
    done = step(stepped.kept, Answer(send.attempt_id, Outcome.WRITTEN, written), 1.03, T)
    assert Done(7, written) in done.actions


def test_a_checkpoint_that_cannot_be_confirmed_in_time_fails_and_the_renewals_go_on() -> None:
    target = ExtendedSequenceNumber("42")
    kept = step(_held(), Ask(Request(7, Op.CHECKPOINT, 0.5, target)), 0.5, T).kept
    assert kept is not None
    now = 0.5
    actions: list[Action] = []
    while now < 3.0:
        stepped = step(kept, Tick(), now, T)
        actions += stepped.actions
        assert stepped.kept is not None
        kept = stepped.kept
        for send in _sends(stepped.actions):
            kept = step(kept, Answer(send.attempt_id, Outcome.THROTTLED, error="slow down"), now, T).kept
            assert kept is not None
        now += 0.05
    [failed] = [a for a in actions if isinstance(a, Failed)]
    assert failed.token == 7 and failed.failure is Failure.THROTTLED
    assert kept.write is not None and kept.write.op is Op.RENEW


def test_a_release_that_gets_no_answer_lets_the_lease_expire_and_answers_once() -> None:
    kept = step(_held(), Ask(Request(9, Op.RELEASE, 0.5)), 0.5, T).kept
    assert kept is not None
    final = step(kept, Tick(), 0.5 + T.release_wait_s, T)
    assert final.kept is None and next(a for a in final.actions if isinstance(a, Failed)).token == 9


def test_a_release_confirmed_through_a_read_is_released() -> None:
    kept = step(_held(), Ask(Request(9, Op.RELEASE, 0.5)), 0.5, T).kept
    assert kept is not None
    [attempt] = outstanding(kept)
    kept = step(kept, Answer(attempt.attempt_id, Outcome.CONFLICT), 0.6, T).kept
    assert kept is not None
    [read] = outstanding(kept)
    released = replace(LEASE, lease_owner=None, lease_counter=6)
    final = step(kept, Answer(read.attempt_id, Outcome.SEEN, released), 0.7, T)
    assert final.kept is None and Released() in final.actions and Done(9, released) in final.actions


def test_renew_now_starts_a_renewal_at_once() -> None:
    stepped = step(_held(), RenewNow(), 0.1, T)
    assert [s.op for s in _sends(stepped.actions)] == [Op.RENEW]


def test_renew_now_during_a_write_in_flight_renews_again_once_it_settles() -> None:
    """The write in flight was sent before the ask: its answer may show the item as it was before
    (a hand-off mark written meanwhile), so another renewal follows, not before the first settles."""
    sent = step(_held(), Tick(), 1.0, T)
    [first] = _sends(sent.actions)
    assert sent.kept is not None
    asked = step(sent.kept, RenewNow(), 1.05, T)
    assert not _sends(asked.actions) and asked.kept is not None and asked.kept.renew_asked
    answered = step(
        asked.kept, Answer(first.attempt_id, Outcome.WRITTEN, replace(LEASE, lease_counter=6)), 1.1, T
    )
    [again] = _sends(answered.actions)
    assert again.op is Op.RENEW and again.attempt_id > first.attempt_id and again.lease.lease_counter == 6
    assert answered.kept is not None and not answered.kept.renew_asked


def test_a_queued_checkpoint_answers_a_renewal_asked_for_meanwhile() -> None:
    sent = step(_held(), Tick(), 1.0, T)
    [first] = _sends(sent.actions)
    assert sent.kept is not None
    asked = step(sent.kept, RenewNow(), 1.05, T)
    assert asked.kept is not None
    request = Request(1, Op.CHECKPOINT, 1.06, ExtendedSequenceNumber("5"))
    queued = step(asked.kept, Ask(request), 1.06, T)
    assert queued.kept is not None
    answered = step(
        queued.kept, Answer(first.attempt_id, Outcome.WRITTEN, replace(LEASE, lease_counter=6)), 1.1, T
    )
    assert [s.op for s in _sends(answered.actions)] == [Op.CHECKPOINT]
    assert answered.kept is not None and not answered.kept.renew_asked


# -- a simulated table, with lost replies and a thief -----------------------------------------------


@dataclass
class Table:
    lease: Lease
    applied_sends: list[float] = field(default_factory=list)  # send times of our writes that applied

    def write(self, send: Send, sent_at: float) -> tuple[bool, Lease | None]:
        """Apply ``send`` if its fence holds; (applied, the item after)."""
        current = self.lease
        ours = current.lease_owner == ME
        if current.lease_counter != send.lease.lease_counter or not ours:
            return False, current
        counter = current.lease_counter + 1
        if send.op is Op.RELEASE:
            self.lease = replace(current, lease_owner=None, lease_counter=counter)
        elif send.op is Op.CHECKPOINT:
            assert send.checkpoint is not None
            self.lease = replace(current, lease_counter=counter, checkpoint=send.checkpoint)
        else:
            self.lease = replace(current, lease_counter=counter)
        self.applied_sends.append(sent_at)
        return True, self.lease


@dataclass
class Thief:
    """Another worker: takes the lease once it has seen the counter unchanged for the failover time."""

    counter: int
    changed_at: float

    def act(self, table: Table, now: float) -> None:
        lease = table.lease
        if lease.lease_counter != self.counter:
            self.counter, self.changed_at = lease.lease_counter, now
        elif lease.lease_owner == ME and now - self.changed_at > L:
            table.lease = replace(lease, lease_owner="thief", lease_counter=lease.lease_counter + 1)


@settings(max_examples=examples(300), deadline=None)
@given(
    seed=st.integers(0, 2**32),
    fault_rate=st.floats(0.0, 0.9),
    lost_reply_rate=st.floats(0.0, 0.5),
    latency=st.floats(0.0, 1.5),
    thief=st.booleans(),
)
def test_simulated_deliveries_never_overlap_another_owner_and_losses_are_real(
    seed: int, fault_rate: float, lost_reply_rate: float, latency: float, thief: bool
) -> None:
    rng = random.Random(seed)
    table = Table(LEASE)
    robber = Thief(LEASE.lease_counter, 0.0) if thief else None
    kept: Kept | None = start(LEASE, 0.0, ME)
    pending: list[tuple[float, Send, float]] = []  # (answer due, send, sent at)
    tokens: dict[int, int] = {}  # request token -> answers seen
    last_confirmed = 0.0
    now = 0.0
    next_token = 1
    while now < 30.0 and kept is not None:
        actions: list[Action] = []
        if rng.random() < 0.1 and not any(r.op is Op.RELEASE for r in kept.queue):
            target = ExtendedSequenceNumber(str(rng.randrange(1000, 2000)))
            op = Op.RELEASE if rng.random() < 0.05 else Op.CHECKPOINT
            tokens[next_token] = 0
            stepped = step(
                kept, Ask(Request(next_token, op, now, target if op is Op.CHECKPOINT else None)), now, T
            )
            next_token += 1
        else:
            stepped = step(kept, Tick(), now, T)
        kept = stepped.kept
        actions += stepped.actions
        for due, send, sent_at in sorted((p for p in pending if p[0] <= now), key=lambda p: p[0]):
            pending.remove((due, send, sent_at))
            if kept is None:
                break
            if send.op is Op.READ:
                answer = (
                    Answer(send.attempt_id, Outcome.SEEN, table.lease)
                    if rng.random() >= fault_rate
                    else Answer(send.attempt_id, Outcome.UNKNOWN, error="timeout")
                )
            elif rng.random() < fault_rate:
                kind = rng.choice([Outcome.THROTTLED, Outcome.UNKNOWN])
                answer = Answer(send.attempt_id, kind, error=str(kind))
            else:
                applied, after = table.write(send, sent_at)
                if rng.random() < lost_reply_rate:
                    answer = Answer(send.attempt_id, Outcome.UNKNOWN, error="reply lost")
                elif applied:
                    answer = Answer(send.attempt_id, Outcome.WRITTEN, after)
                else:
                    answer = Answer(send.attempt_id, Outcome.CONFLICT, error="condition")
            stepped = step(kept, answer, now, T)
            kept = stepped.kept
            actions += stepped.actions
        for action in actions:
            if isinstance(action, Send):
                pending.append((now + rng.uniform(0.0, latency), action, now))
            if isinstance(action, Done | Failed):
                tokens[action.token] += 1
            if isinstance(action, Lost):
                # lost only if it is someone else's, or after the give-up time with nothing confirmed
                assert (
                    table.lease.lease_owner != ME
                    or now >= held_lease_deadline(last_confirmed, L) + T.give_up_after_s - 1e-9
                )
            if isinstance(action, Confirmed):
                last_confirmed = max(last_confirmed, action.until - held_lease_deadline(0.0, L))
        if kept is not None:
            assert len(outstanding(kept)) <= 2
            until = deliver_until(kept, T)
            latest = max(table.applied_sends, default=0.0)
            # safety: deliveries end before anyone may see the lease expire
            assert until <= held_lease_deadline(latest, L) + 1e-9
            if now < until:
                assert table.lease.lease_owner == ME or table.lease.checkpoint_owner == ME
        if robber is not None:
            robber.act(table, now)
        now += rng.choice([0.01, 0.05, 0.1, 0.3])
    assert all(n <= 1 for n in tokens.values()), "a request answered twice"
    waiting = set() if kept is None else {r.token for r in kept.queue}
    if kept is not None and kept.write is not None and kept.write.request is not None:
        waiting.add(kept.write.request.token)
    assert all(n == 1 for token, n in tokens.items() if token not in waiting), "a request never answered"


def test_with_no_faults_a_lease_is_renewed_for_ever_and_never_stops_delivering() -> None:
    table = Table(LEASE)
    kept: Kept | None = start(LEASE, 0.0, ME)
    now = 0.0
    while now < 60.0:
        assert kept is not None
        stepped = step(kept, Tick(), now, T)
        kept = stepped.kept
        for send in _sends(stepped.actions):
            assert kept is not None
            _, after = table.write(send, now)
            kept = step(kept, Answer(send.attempt_id, Outcome.WRITTEN, after), now + 0.01, T).kept
        assert kept is not None and deliver_until(kept, T) > now
        now += 0.05
    assert table.lease.lease_counter > LEASE.lease_counter + 55


@pytest.mark.parametrize(("vouched", "deadline_from"), [(False, 2.0), (True, 0.5)])
def test_a_checkpoint_extends_the_deadline_unless_a_heartbeat_keeps_the_lease(
    vouched: bool, deadline_from: float
) -> None:
    """Renewing per worker the others time the lease by its owner's heartbeat alone, so its deadline
    runs from the last confirmed heartbeat (here at 0.5 s), never from a checkpoint they may see late."""
    kept = replace(_held(0.5), vouched=vouched)
    target = ExtendedSequenceNumber("42")
    asked = step(kept, Ask(Request(7, Op.CHECKPOINT, 2.0, target)), 2.0, T)
    [send] = _sends(asked.actions)
    assert send.op is Op.CHECKPOINT and asked.kept is not None
    written = replace(LEASE, lease_counter=6, checkpoint=target)
    done = step(asked.kept, Answer(send.attempt_id, Outcome.WRITTEN, written), 2.1, T)
    assert done.kept is not None and done.kept.confirmed_at == deadline_from
    assert Done(7, written) in done.actions


def test_a_twin_refused_while_its_sibling_is_still_out_says_it_raced() -> None:
    """A hedged twin whose condition fails while the first attempt is unanswered most likely lost the race
    to that attempt: the retry says so (the keeper logs it at DEBUG, not as a WARNING)."""
    timings = KeepTimings.for_failover(10.0)
    kept = start(Lease("s", TRIM_HORIZON, ME, 3), 0.0, ME)
    stepped = step(kept, Ask(Request(1, Op.CHECKPOINT, 0.0, ExtendedSequenceNumber("5"))), 0.0, timings)
    first = next(a for a in stepped.actions if isinstance(a, Send))
    assert stepped.kept is not None
    hedged = step(stepped.kept, Tick(), timings.hedge_after_s + 0.01, timings)
    twin = next(a for a in hedged.actions if isinstance(a, Send))
    assert hedged.kept is not None and twin.attempt_id != first.attempt_id
    refused = step(hedged.kept, Answer(twin.attempt_id, Outcome.CONFLICT, error="no"), 0.7, timings)
    assert [a.racing for a in refused.actions if isinstance(a, keeping.Retrying)] == [True]
    alone = step(stepped.kept, Answer(first.attempt_id, Outcome.CONFLICT, error="no"), 0.1, timings)
    assert [a.racing for a in alone.actions if isinstance(a, keeping.Retrying)] == [False]
