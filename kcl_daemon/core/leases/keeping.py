"""Keeping one held lease: when to write, what an answer means, when deliveries stop, when it is lost.

Pure: the lease keeper (:mod:`kcl_daemon.leases.keeper`) feeds :func:`step` each event with the time
it happened and carries out the actions it returns. Every write of a held lease (renewal, checkpoint,
release) goes through here, one *logical write* at a time per lease, each fenced on the counter of the
lease as last confirmed (contract §4.2), so a checkpoint never fences a renewal out or waits behind it.

* **Deadline.** Deliveries to the child are allowed until :func:`deliver_until`: the send time of the
  last write *known* to have applied, plus the failover time, minus the local-expiry margin
  (:func:`kcl_daemon.core.leases.expiry.held_lease_deadline`; no other worker may see the lease expire
  before). A lease adopted from the leader delivers nothing until its first renewal is confirmed.
* **Attempts.** A renewal is due every ``renew_every_s`` after the last confirmed send. An attempt
  without an answer after ``hedge_after_s`` gets a second one beside it (fenced on the same counter:
  at most one can apply); a failure is followed by the next attempt at once (a throttle after a short
  backoff, ``min(0.05 x 2^n, 0.5)`` s). There is no attempt limit: only the deadlines below.
* **Unknown outcomes.** A timeout, a reset or a 5xx may come after the write applied. The next attempt
  is sent anyway; if it fails its condition, a consistent read decides (as
  :mod:`kcl_daemon.core.leases.reconcile`): the item still ours at the fenced counter means not applied (send
  again); ours at a higher counter means one of our writes applied, and the deadline is then based on
  the *earliest* send of any write attempt on that counter whose outcome was unknown (the one that
  applied was sent no earlier); anything else means another worker has the lease: lost.
* **Past the deadline** the lease is kept while nothing says it is someone else's: deliveries stop, the
  writes go on, and a write that lands makes it deliverable again (the table decides, as ever: a taker
  or leader whose fenced write comes first wins, and ours then fails). It is given up (*lost*) when a
  read shows another owner, when its item cannot be read, or when ``give_up_after_s`` more have
  passed with no write confirmed.
* **Requests.** A checkpoint waits for the logical write in progress and is then written fenced on the
  counter that write produced; it fails (the child hears the Java exception) when it cannot be
  confirmed by the lease's delivery deadline or within ``renew_every_s``, whichever is later. A
  release is tried for ``release_wait_s``, after which the lease simply expires.

``now`` is monotonic seconds, always passed in; every action the shell must take comes back as data.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from kcl_daemon.core.leases.expiry import held_lease_deadline, local_expiry_margin_s
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.reconcile import describe
from kcl_daemon.core.leases.slotted import replace  # on the hot path: see that module
from kcl_daemon.core.leases.timings import KeepTimings
from kcl_daemon.core.sequence import ExtendedSequenceNumber

NEVER: Final = float("-inf")
FOREVER: Final = float("inf")
MAX_IN_FLIGHT: Final = 2
THROTTLE_BACKOFF_S: Final = 0.05
THROTTLE_BACKOFF_MAX_S: Final = 0.5
#: after an unknown outcome the next attempt goes at once; if that fails too, after 20, 40, ... 250 ms
#: (a refused connection answers at once: without this the keeper would spin)
UNKNOWN_BACKOFF_S: Final = 0.02
UNKNOWN_BACKOFF_MAX_S: Final = 0.25
MISSING_TABLE_BACKOFF_S: Final = 0.5


class Op(enum.StrEnum):
    RENEW = "renew"
    CHECKPOINT = "checkpoint"
    RELEASE = "release"
    READ = "read"  # the consistent read that settles an unknown outcome


class Failure(enum.StrEnum):
    """Why a checkpoint or release request failed (the shell maps it to the project's errors)."""

    LOST = "lost"  # the lease is someone else's (or gone): ShutdownException for a checkpoint
    THROTTLED = "throttled"  # the last attempt was throttled: ThrottlingException
    UNAVAILABLE = "unavailable"  # no confirmation in time: KinesisClientLibDependencyException


@dataclass(frozen=True, slots=True)
class Request:
    """A checkpoint or a release asked for by the shard (or the worker), answered by ``token``."""

    token: int
    op: Op
    requested_at: float
    checkpoint: ExtendedSequenceNumber | None = None
    children: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Attempt:
    attempt_id: int
    op: Op  # the op sent: the write's, or READ
    sent_at: float


@dataclass(frozen=True, slots=True)
class Write:
    """The logical write in progress: attempts until it is confirmed, refuted or given up."""

    op: Op
    fenced: Lease  # the lease as confirmed when the write started: every attempt is fenced on its counter
    request: Request | None = None
    in_flight: tuple[Attempt, ...] = ()
    attempt_ids: frozenset[int] = frozenset()
    next_at: float = NEVER
    reading: bool = False
    throttles: int = 0
    unknowns: int = 0
    failures: int = 0
    last_error: str = ""
    last_failure: Failure = Failure.UNAVAILABLE


@dataclass(frozen=True, slots=True)
class Kept:
    """One held lease, as the keeper knows it."""

    lease: Lease  # as last confirmed
    confirmed_at: float  # send time of the write that produced ``lease`` (or the adoption time)
    worker_id: str
    validated: bool = True  # False until a write of ours is confirmed (a lease adopted from the leader)
    write: Write | None = None
    queue: tuple[Request, ...] = ()
    #: earliest send of a write attempt on ``lease.lease_counter`` whose outcome is not known
    unresolved_since: float | None = None
    next_attempt_id: int = 1
    #: a renewal was asked for while another write was in flight: begin one when that write settles
    renew_asked: bool = False
    #: kept alive by this worker's heartbeat (``leaseRenewal = PER_WORKER``): no periodic renewal of its
    #: own; each confirmed heartbeat moves ``confirmed_at`` (:func:`vouch`)
    vouched: bool = False


# -- events ----------------------------------------------------------------------------------------


class Outcome(enum.StrEnum):
    WRITTEN = "written"  # the write returned the stored item
    CONFLICT = "conflict"  # its condition failed
    THROTTLED = "throttled"  # rejected unapplied
    UNKNOWN = "unknown"  # a timeout, a reset, a 5xx: it may have applied
    MISSING = "missing"  # the table does not exist (not applied)
    UNREADABLE = "unreadable"  # the item cannot be decoded
    SEEN = "seen"  # a read's answer: ``lease`` (None: no such item)


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed: send what is due, fail what is overdue."""


@dataclass(frozen=True, slots=True)
class Answer:
    attempt_id: int
    outcome: Outcome
    lease: Lease | None = None
    error: str = ""


@dataclass(frozen=True, slots=True)
class Ask:
    request: Request


@dataclass(frozen=True, slots=True)
class RenewNow:
    """Renew at once (tests and the hand-over of a freshly taken lease), whatever the period says."""


Event = Tick | Answer | Ask | RenewNow


# -- actions ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    attempt_id: int
    op: Op
    lease: Lease  # fenced on its counter (for READ: the key to read)
    checkpoint: ExtendedSequenceNumber | None = None
    children: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Confirmed:
    """A write of ours is known to have applied: the lease as stored, deliverable until ``until``."""

    lease: Lease
    until: float


@dataclass(frozen=True, slots=True)
class Done:
    token: int
    lease: Lease


@dataclass(frozen=True, slots=True)
class Failed:
    token: int
    failure: Failure
    reason: str


@dataclass(frozen=True, slots=True)
class Lost:
    reason: str
    unreadable: bool = False


@dataclass(frozen=True, slots=True)
class Released:
    """The release applied (or the lease is no longer ours): stop keeping it, tell nobody."""


@dataclass(frozen=True, slots=True)
class Judged:
    """What a consistent read showed after a condition failure, and what it means (for the log)."""

    op: Op
    reason: str


@dataclass(frozen=True, slots=True)
class Retrying:
    """An attempt failed and another follows; ``failures`` counts them within this logical write;
    ``racing``: another attempt of the same write was still out (a hedged twin: a condition failure is
    then most likely that twin having applied first, which the next answer or read shows)."""

    op: Op
    error: str
    failures: int
    racing: bool = False


Action = Send | Confirmed | Done | Failed | Lost | Released | Retrying | Judged


@dataclass(frozen=True, slots=True)
class Stepped:
    kept: Kept | None  # None: no longer kept (lost or released)
    actions: tuple[Action, ...] = field(default=())


# -- queries ---------------------------------------------------------------------------------------


def releasing(kept: Kept) -> bool:
    """Whether the lease is being given back (its records stop by design, not for want of a renewal)."""
    return any(r.op is Op.RELEASE for r in _requests(kept))


def deliver_until(kept: Kept, timings: KeepTimings) -> float:
    """Until when records may be delivered to the lease's child (monotonic seconds)."""
    if not kept.validated or releasing(kept):
        return NEVER  # adopted and not renewed yet, or being given back
    return held_lease_deadline(kept.confirmed_at, timings.failover_s)


def give_up_at(kept: Kept, timings: KeepTimings) -> float:
    """When the lease is lost if no write of ours has been confirmed by then."""
    return (
        kept.confirmed_at
        + timings.failover_s
        - local_expiry_margin_s(timings.failover_s)
        + timings.give_up_after_s
    )


def _request_fails_at(kept: Kept, request: Request, timings: KeepTimings) -> float:
    if request.op is Op.RELEASE:
        return request.requested_at + timings.release_wait_s
    deadline = held_lease_deadline(kept.confirmed_at, timings.failover_s) if kept.validated else NEVER
    return max(deadline, request.requested_at + timings.renew_every_s)


def next_wake(kept: Kept, timings: KeepTimings) -> float:
    """The next time :func:`step` has something to do on a :class:`Tick` (``inf``: only on events)."""
    times = [give_up_at(kept, timings), *(_request_fails_at(kept, r, timings) for r in kept.queue)]
    write = kept.write
    if write is None:
        if kept.queue:
            return NEVER  # a queued request starts at once
        if not kept.validated:
            times.append(NEVER)
        elif not kept.vouched:
            times.append(kept.confirmed_at + timings.renew_every_s)
        return min(times)
    if write.request is not None:
        times.append(_request_fails_at(kept, write.request, timings))
    if not write.in_flight:
        times.append(write.next_at)
    elif len(write.in_flight) < MAX_IN_FLIGHT:
        times.append(max(write.next_at, write.in_flight[-1].sent_at + timings.hedge_after_s))
    return min(times)


# -- the step --------------------------------------------------------------------------------------


def start(lease: Lease, confirmed_at: float, worker_id: str, *, validated: bool = True) -> Kept:
    """A lease just taken (``confirmed_at`` = the take's send time) or adopted (``validated=False``)."""
    return Kept(lease, confirmed_at, worker_id, validated=validated)


def step(kept: Kept, event: Event, now: float, timings: KeepTimings) -> Stepped:
    """The lease after ``event`` at ``now``, and what the shell must do."""
    actions: list[Action] = []
    state: Kept | None = kept
    match event:
        case Ask(request=request):
            state = replace(kept, queue=(*kept.queue, request))
        case RenewNow():
            if kept.write is None and not kept.queue:
                state = _begin(kept, Op.RENEW, None, now)
            else:  # the write in flight was sent before the ask: its answer may predate what is asked for
                state = replace(kept, renew_asked=True)
        case Answer():
            state = _answer(kept, event, now, timings, actions)
        case Tick():
            pass
    if state is not None:
        state = _advance(state, now, timings, actions)
    return Stepped(state, tuple(actions))


def vouch(kept: Kept, sent_at: float, now: float, timings: KeepTimings) -> Stepped:
    """This worker's heartbeat, sent at ``sent_at``, was confirmed (``leaseRenewal = PER_WORKER``): a
    vouched, validated lease counts as renewed by it (no other worker sees it expire before ``sent_at +
    failover``: its expiry waits for the heartbeat to stand still too). Anything else is unchanged."""
    if not kept.vouched or not kept.validated or sent_at <= kept.confirmed_at:
        return Stepped(kept)
    renewed = replace(kept, confirmed_at=sent_at)
    actions: list[Action] = [Confirmed(renewed.lease, deliver_until(renewed, timings))]
    advanced = _advance(renewed, now, timings, actions)
    return Stepped(advanced, tuple(actions))


def per_lease(kept: Kept) -> Kept:
    """Back to per-lease renewals: renewed at once, then every renewal period as before."""
    if not kept.vouched:
        return kept
    return replace(kept, vouched=False, renew_asked=True)


def _begin(kept: Kept, op: Op, request: Request | None, now: float) -> Kept:
    """Start a write; any write of ours renews the lease, so it answers a renewal asked for."""
    return replace(kept, write=Write(op, kept.lease, request, next_at=now), renew_asked=False)


def _advance(kept: Kept, now: float, timings: KeepTimings, actions: list[Action]) -> Kept | None:
    """Time-driven work: give up, fail overdue requests, start the next write, send attempts."""
    if now >= give_up_at(kept, timings):
        silent = now - kept.confirmed_at
        last = kept.write.last_error if kept.write is not None and kept.write.last_error else "no answer"
        actions.extend(
            Failed(r.token, Failure.UNAVAILABLE, "the lease was given up") for r in _requests(kept)
        )
        actions.append(Lost(f"not renewed for {silent:.1f}s (local expiry); last: {last}"))
        return None
    write = kept.write
    if write is not None and write.request is not None:
        request = write.request
        if now >= _request_fails_at(kept, request, timings):
            if request.op is Op.RELEASE:
                actions.append(Failed(request.token, write.last_failure, write.last_error or "no answer"))
                actions.extend(Failed(r.token, Failure.LOST, "released") for r in kept.queue)
                return None  # it expires for the others instead
            reason = write.last_error or "no answer in time"
            actions.append(Failed(request.token, write.last_failure, reason))
            # the attempts already sent may still apply: go on as a renewal on the same counter
            write = replace(write, op=Op.RENEW, request=None)
            kept = replace(kept, write=write)
    overdue = [r for r in kept.queue if now >= _request_fails_at(kept, r, timings)]
    if overdue:
        reason = (write.last_error if write is not None else "") or "the write before it took too long"
        actions.extend(Failed(r.token, Failure.UNAVAILABLE, reason) for r in overdue)
        kept = replace(kept, queue=tuple(r for r in kept.queue if r not in overdue))
    if write is None:
        if kept.queue:
            request, rest = kept.queue[0], kept.queue[1:]
            kept = replace(kept, queue=rest)
            kept = _begin(kept, request.op, request, now)
        elif (
            kept.renew_asked
            or not kept.validated
            or (not kept.vouched and now >= kept.confirmed_at + timings.renew_every_s)
        ):
            kept = _begin(kept, Op.RENEW, None, now)
        else:
            return kept
    return _send_due(kept, now, timings, actions)


def _send_due(kept: Kept, now: float, timings: KeepTimings, actions: list[Action]) -> Kept:
    write = kept.write
    assert write is not None
    if now < write.next_at:
        return kept
    if write.in_flight and (
        len(write.in_flight) >= MAX_IN_FLIGHT or now < write.in_flight[-1].sent_at + timings.hedge_after_s
    ):
        return kept
    op = Op.READ if write.reading else write.op
    attempt = Attempt(kept.next_attempt_id, op, now)
    request = write.request
    actions.append(
        Send(
            attempt.attempt_id,
            op,
            write.fenced,
            request.checkpoint if request is not None else None,
            request.children if request is not None else None,
        )
    )
    unresolved = kept.unresolved_since
    if op is not Op.READ and unresolved is None:
        unresolved = now
    write = replace(
        write,
        in_flight=(*write.in_flight, attempt),
        attempt_ids=write.attempt_ids | {attempt.attempt_id},
    )
    return replace(kept, write=write, next_attempt_id=kept.next_attempt_id + 1, unresolved_since=unresolved)


def _requests(kept: Kept) -> list[Request]:
    current = [kept.write.request] if kept.write is not None and kept.write.request is not None else []
    return [*current, *kept.queue]


def _ours(lease: Lease, me: str) -> bool:
    """Still this worker's to serve: its owner, or the one that must finish a hand-off (contract §5.3)."""
    return lease.lease_owner == me or lease.checkpoint_owner == me


def _answer(
    kept: Kept, answer: Answer, now: float, timings: KeepTimings, actions: list[Action]
) -> Kept | None:
    write = kept.write
    if write is None or answer.attempt_id not in write.attempt_ids:
        return kept  # an answer to a write already settled (a hedged twin): nothing to learn
    attempt = next((a for a in write.in_flight if a.attempt_id == answer.attempt_id), None)
    sent_at = attempt.sent_at if attempt is not None else now
    write = replace(write, in_flight=tuple(a for a in write.in_flight if a.attempt_id != answer.attempt_id))
    kept = replace(kept, write=write)
    match answer.outcome:
        case Outcome.WRITTEN:
            assert answer.lease is not None
            return _confirm(kept, answer.lease, sent_at, timings, actions)
        case Outcome.UNREADABLE:
            actions.extend(Failed(r.token, Failure.LOST, answer.error) for r in _requests(kept))
            actions.append(Lost(answer.error, unreadable=True))
            return None
        case Outcome.SEEN:
            return _judge(kept, answer.lease, sent_at, now, timings, actions)
        case Outcome.CONFLICT:
            # a write of ours on this counter may have applied, or another worker moved the lease: read
            write = replace(write, reading=True, next_at=now, last_error=answer.error or "condition failed")
        case Outcome.THROTTLED:
            backoff = min(THROTTLE_BACKOFF_S * 2**write.throttles, THROTTLE_BACKOFF_MAX_S)
            write = replace(
                write,
                next_at=now + backoff,
                throttles=write.throttles + 1,
                last_error=answer.error,
                last_failure=Failure.THROTTLED,
            )
        case Outcome.MISSING:
            write = replace(
                write,
                next_at=now + MISSING_TABLE_BACKOFF_S,
                last_error=answer.error,
                last_failure=Failure.UNAVAILABLE,
            )
        case Outcome.UNKNOWN:
            streak = write.unknowns
            backoff = (
                0.0 if streak == 0 else min(UNKNOWN_BACKOFF_S * 2 ** (streak - 1), UNKNOWN_BACKOFF_MAX_S)
            )
            write = replace(
                write,
                next_at=now + backoff,
                unknowns=streak + 1,
                last_error=answer.error,
                last_failure=Failure.UNAVAILABLE,
            )
    op = attempt.op if attempt is not None else write.op
    write = replace(write, failures=write.failures + 1)
    actions.append(Retrying(op, answer.error, write.failures, racing=bool(write.in_flight)))
    return replace(kept, write=write)


def _confirm(
    kept: Kept, lease: Lease, sent_at: float, timings: KeepTimings, actions: list[Action]
) -> Kept | None:
    """A write of ours applied, sent at ``sent_at``: the lease as stored, with a fresh deadline."""
    write = kept.write
    assert write is not None
    confirmed = replace(
        kept,
        lease=lease,
        confirmed_at=_confirmed_at(kept, sent_at),
        validated=True,
        write=None,
        unresolved_since=None,
    )
    request = write.request
    if write.op is Op.RELEASE:
        if request is not None:
            actions.append(Done(request.token, lease))
        actions.extend(Failed(r.token, Failure.LOST, "released") for r in kept.queue)
        actions.append(Released())
        return None
    actions.append(Confirmed(lease, deliver_until(confirmed, timings)))
    if request is not None and write.op is Op.CHECKPOINT:
        actions.append(Done(request.token, lease))
    return confirmed


def _confirmed_at(kept: Kept, sent_at: float) -> float:
    """Where a lease's deadline runs from after a write of ours sent at ``sent_at``: that write, unless
    a heartbeat keeps the lease (``leaseRenewal = PER_WORKER``): then from the last confirmed heartbeat
    only, so that the others may time it by the heartbeat alone, whatever its counter did (a checkpoint
    they first see at a later scan). An adopted lease's first renewal validates it."""
    if not kept.validated:
        return sent_at
    if kept.vouched:
        return kept.confirmed_at
    return max(sent_at, kept.confirmed_at)


def _judge(
    kept: Kept,
    seen: Lease | None,
    sent_at: float,
    now: float,
    timings: KeepTimings,
    actions: list[Action],
) -> Kept | None:
    """A consistent read after a condition failure: applied, not applied, or lost."""
    write = kept.write
    assert write is not None
    me = kept.worker_id
    fenced = write.fenced
    releasing = write.op is Op.RELEASE
    if seen is None:
        if releasing:
            return _confirm(kept, fenced, sent_at, timings, actions)
        return _lose(kept, "the lease was deleted", actions)
    if releasing and seen.lease_owner is None:
        return _confirm(kept, seen, sent_at, timings, actions)  # released (by this write or before it)
    if not _ours(seen, me):
        if releasing:
            return _confirm(kept, seen, sent_at, timings, actions)  # nothing of ours left to release
        return _lose(
            kept, f"the table shows {describe(seen)} (we wrote on counter {fenced.lease_counter})", actions
        )
    shown = f"the table shows {describe(seen)}"
    if seen.lease_counter <= fenced.lease_counter:
        # as the write found it: not applied (a hand-off mark does not change the counter): send again
        actions.append(Judged(write.op, f"{shown}: our {write.op.value} was not applied"))
        return replace(kept, write=replace(write, reading=False, next_at=now))
    # ours at a higher counter: one of our writes on the fenced counter applied; the earliest send whose
    # outcome was unknown is the safe basis for the deadline (the one that applied was sent no earlier)
    if kept.unresolved_since is None:
        # no write of ours can have done it (each attempt was refused unapplied): write again on it
        rebased = replace(write, fenced=seen, reading=False, next_at=now)
        return replace(kept, lease=seen, write=rebased)
    basis = kept.unresolved_since
    request = write.request
    actions.append(Judged(write.op, f"{shown}: a write of ours was applied"))
    if write.op is Op.RENEW or (
        write.op is Op.CHECKPOINT and request is not None and seen.checkpoint == request.checkpoint
    ):
        return _confirm(kept, seen, basis, timings, actions)
    # a renewal of ours applied, not this checkpoint or release: confirm it, then write that again
    renewed = replace(kept, write=replace(write, op=Op.RENEW, request=None))
    confirmed = _confirm(renewed, seen, basis, timings, actions)
    assert confirmed is not None
    return replace(confirmed, queue=(request, *confirmed.queue)) if request is not None else confirmed


def _lose(kept: Kept, reason: str, actions: list[Action]) -> Kept | None:
    actions.extend(Failed(r.token, Failure.LOST, reason) for r in _requests(kept))
    actions.append(Lost(reason))
    return None


def outstanding(kept: Kept) -> Sequence[Attempt]:
    """Attempts sent and not answered yet."""
    return () if kept.write is None else kept.write.in_flight
