"""The lease keeper: every write of the leases this worker holds, on a thread of its own.

The shell around :mod:`kcl_daemon.core.leases.keeping`. Renewals, checkpoints and releases of held leases
never wait for the event loop, the shared I/O pools or each other's locks: a ``lease-keeper`` thread
wakes at each lease's next due time (:func:`~kcl_daemon.core.leases.keeping.next_wake`, on
``time.monotonic``), attempts run on the keeper's own pool (``lease-renew``) against a lease table on
the keeper's own DynamoDB client, whose connect and read timeouts are one attempt's budget
(:func:`~kcl_daemon.core.leases.timings.attempt_timeout_for`), and every
answer is judged as it arrives, on the
pool thread that got it. A CPU-starved or busy event loop therefore delays neither a renewal nor the
moment a lease stops being deliverable.

Attempts go to one of two bounded pools, so that renewals never queue behind checkpoints: a
checkpoint's first attempt goes to the checkpoint pool (``lease-checkpoint``, when one is given), and
everything that keeps a lease alive - renewals, a hedged twin or a retry of any write (a checkpoint's
too: while it is in progress it is the lease's only write), the reads that settle unknown outcomes,
releases - to the renewal pool (``lease-renew``). At 256 shards whose children checkpoint every batch,
about a thousand checkpoints a second shared the renewal pool with the 77 renewals a second.

The event loop hears of renewals, losses and releases through ``notify`` (the coordinator passes
``call_soon_threadsafe``); shard consumers read :meth:`LeaseKeeper.deliver_until` directly, so their
delivery fence does not depend on the loop either. Without :meth:`LeaseKeeper.start` (tests on a fake
clock) nothing happens on its own: the caller drives the keeper with :meth:`LeaseKeeper.tick`.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, replace
from typing import Protocol

from kcl_daemon.core.leases import keeping
from kcl_daemon.core.leases.keeping import (
    Answer,
    Ask,
    Confirmed,
    Done,
    Failed,
    Failure,
    Judged,
    Kept,
    Lost,
    Op,
    Outcome,
    Released,
    RenewNow,
    Request,
    Retrying,
    Send,
    Tick,
)
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import CorruptLeaseItem
from kcl_daemon.core.leases.timings import KeepTimings
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.errors import (
    DependencyUnavailable,
    KclError,
    LeaseConflict,
    LeaseUnreadable,
    Throttled,
    TransientNetwork,
)

logger = logging.getLogger(__name__)

#: The keeper thread wakes at least this often, whatever the leases say (a safety net, cheap).
MAX_SLEEP_S = 0.5


class KeeperTable(Protocol):
    """The lease-table writes the keeper makes: one attempt each, no retry or re-read of their own."""

    def get_lease(self, lease_key: str, *, consistent: bool = False) -> Lease | None: ...

    def renew(self, lease: Lease) -> Lease: ...

    def checkpoint(
        self,
        lease: Lease,
        checkpoint: ExtendedSequenceNumber,
        *,
        pending: ExtendedSequenceNumber | None = None,
        child_shard_ids: Iterable[str] | None = None,
    ) -> Lease: ...

    def release(self, lease: Lease) -> Lease: ...


@dataclass(frozen=True, slots=True)
class KeeperEvent:
    """What the event loop hears: ``confirmed`` (a write of ours applied), ``lost`` or ``released``."""

    kind: str
    lease_key: str
    lease: Lease | None = None
    reason: str = ""
    unreadable: bool = False
    #: for ``confirmed``: seconds from the attempt's send to its answer
    latency_s: float = 0.0
    #: for ``confirmed``: the send time of the write that applied (the lease's basis, monotonic)
    confirmed_at: float = 0.0


@dataclass(frozen=True, slots=True)
class _Vouch:
    """The worker's heartbeat sent at ``sent_at`` was confirmed (per-worker renewal)."""

    sent_at: float


_FAILURES: dict[Failure, type[KclError]] = {
    Failure.LOST: LeaseConflict,
    Failure.THROTTLED: Throttled,
    Failure.UNAVAILABLE: TransientNetwork,
}


class LeaseKeeper:
    def __init__(
        self,
        table: KeeperTable,
        worker_id: str,
        timings: KeepTimings,
        pool: Executor,
        *,
        checkpoint_pool: Executor | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        notify: Callable[[KeeperEvent], None] = lambda _: None,
    ) -> None:
        """``pool`` runs every attempt that keeps a lease alive; ``checkpoint_pool`` (None: ``pool``)
        the first attempt of each checkpoint."""
        self.worker_id = worker_id
        self.timings = timings
        self.notify = notify
        #: since when every attempt has found the lease table missing (None: it is there)
        self.missing_since: float | None = None
        self._table = table
        self._pool = pool
        self._checkpoint_pool = checkpoint_pool or pool
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._kept: dict[str, Kept] = {}
        self._until: dict[str, float] = {}  # read without the lock (a dict get is atomic)
        #: each lease's next due time (``keeping.next_wake``), kept as it is stepped
        self._due: dict[str, float] = {}
        #: when the keeper thread's next pass is planned; an event wakes the thread only before it
        self._next_pass = keeping.NEVER
        self._paused: set[str] = set()
        self._futures: dict[int, Future[Lease | None]] = {}
        #: renewals asked for: (the first attempt id whose confirmation answers it, the waiter)
        self._renewals: dict[str, list[tuple[int, Future[None]]]] = {}
        self._sent: dict[tuple[str, int], float] = {}  # (lease, attempt id) -> send time, for the latency
        self._tokens = itertools.count(1)
        #: ``leaseRenewal = PER_WORKER`` and not fallen back: held leases are kept by the heartbeat
        self.per_worker = False
        #: the send time of the last confirmed heartbeat (per-worker renewal; None: none yet)
        self._vouched_at: float | None = None
        self._busy = 0  # attempts submitted whose answer has not been fully handled yet
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the loop-side API (any thread) ----------------------------------------------------------

    def hold(self, lease: Lease, confirmed_at: float, *, validated: bool = True) -> None:
        """Keep ``lease``: taken by a write sent at ``confirmed_at``, or adopted (``validated=False``:
        renewed at once, deliverable once that renewal is confirmed)."""
        if self.per_worker and self._vouched_at is not None:
            # kept by the heartbeat: its deadline runs from the last confirmed one (keeping._confirmed_at)
            confirmed_at = min(confirmed_at, self._vouched_at)
        kept = keeping.start(lease, confirmed_at, self.worker_id, validated=validated)
        if self.per_worker:
            kept = replace(kept, vouched=True)
        with self._lock:
            self._kept[lease.lease_key] = kept
            self._until[lease.lease_key] = keeping.deliver_until(kept, self.timings)
        self._apply(lease.lease_key, Tick())

    def vouch(self, sent_at: float) -> None:
        """This worker's heartbeat sent at ``sent_at`` was confirmed: every lease it keeps is renewed."""
        self._vouched_at = sent_at if self._vouched_at is None else max(self._vouched_at, sent_at)
        for key in self.keys():
            self._apply(key, _Vouch(sent_at))

    def renew_each(self) -> None:
        """Back to per-lease renewals (a fall-back from PER_WORKER): every held lease renewed at once."""
        self.per_worker = False
        with self._lock:
            for key, kept in self._kept.items():
                self._kept[key] = keeping.per_lease(kept)
        for key in self.keys():
            self._apply(key, Tick())

    def forget(self, lease_key: str) -> None:
        """Stop keeping the lease without a write (dropped, or handed off); answers to it are ignored."""
        with self._lock:
            self._kept.pop(lease_key, None)
            self._until.pop(lease_key, None)
            self._due.pop(lease_key, None)
            self._paused.discard(lease_key)
            waiters = self._renewals.pop(lease_key, [])
        for _, waiter in waiters:
            waiter.set_result(None)

    def checkpoint(
        self, lease_key: str, target: ExtendedSequenceNumber, children: Iterable[str] | None = None
    ) -> Future[Lease | None]:
        """Write ``target`` (the keeper's next write of the lease); the future gets the lease as stored,
        or LeaseConflict (lost), Throttled or TransientNetwork (not confirmed in time)."""
        kids = tuple(sorted(set(children))) if children else None
        return self._ask(lease_key, Op.CHECKPOINT, target, kids)

    def release(self, lease_key: str) -> Future[Lease | None]:
        """Give the lease back; the future gets the lease as stored, or an error (it then expires)."""
        return self._ask(lease_key, Op.RELEASE, None, None)

    def renew_now(self, lease_key: str) -> Future[None]:
        """Renew at once; the future completes when a write sent after this call is confirmed, or the
        lease is lost or forgotten (an answer to a write already in flight may predate the call)."""
        waiter: Future[None] = Future()
        with self._lock:
            kept = self._kept.get(lease_key)
            if kept is None:
                waiter.set_result(None)
                return waiter
            self._renewals.setdefault(lease_key, []).append((kept.next_attempt_id, waiter))
        self._apply(lease_key, RenewNow())
        return waiter

    def deliver_until(self, lease_key: str) -> float:
        """Until when the lease's child may be sent records (monotonic; ``-inf``: not now)."""
        return self._until.get(lease_key, keeping.NEVER)

    def give_up_at(self, lease_key: str) -> float | None:
        """When the keeper gives the lease up if nothing of ours is confirmed by then (monotonic; None:
        not kept). A lease still held past it means the keeper itself is stuck."""
        with self._lock:
            kept = self._kept.get(lease_key)
            return None if kept is None else keeping.give_up_at(kept, self.timings)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._kept)

    def in_flight(self) -> int:
        """Attempts sent whose answers are not handled yet (their effects included)."""
        with self._lock:
            return self._busy

    # -- time ------------------------------------------------------------------------------------

    def tick(self) -> float:
        """Do what is due on every lease; returns the next time something will be (monotonic).

        Only the leases whose due time has come are stepped (a step before it does nothing, by
        ``keeping.next_wake``'s definition); the others only have their delivery fence looked at, for the
        warning when records stop. Every event steps its own lease where it happens, so a pass costs
        the leases that are due, not every lease each time any of them is answered: with hundreds of
        leases checkpointing every batch, stepping all of them per answer kept this thread busy."""
        now = self._monotonic()
        with self._lock:
            due = [key for key, at in self._due.items() if at <= now]
        for key in due:
            self._apply(key, Tick(), wake=False)  # the keeper's own pass: it computes its wake below
        now = self._monotonic()
        with self._lock:
            for key, until in self._until.items():
                self._note_pause(key, until, now, self._kept[key])
            wake = min(self._due.values(), default=keeping.FOREVER)
            self._next_pass = wake
        return wake

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Run the keeper thread (idempotent)."""
        if self.running:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread; the leases stay known (a later :meth:`start` goes on with them)."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            # cleared before the pass: an event from another thread during it wakes the next one at once
            self._wake.clear()
            try:
                wake = self.tick()
            except Exception:  # a bug: never let renewals die silently
                logger.exception("the lease keeper failed unexpectedly; going on")
                wake = self._monotonic() + MAX_SLEEP_S
            self._wake.wait(min(max(wake - self._monotonic(), 0.0), MAX_SLEEP_S))

    # -- events ----------------------------------------------------------------------------------

    def _ask(
        self,
        lease_key: str,
        op: Op,
        target: ExtendedSequenceNumber | None,
        children: tuple[str, ...] | None,
    ) -> Future[Lease | None]:
        future: Future[Lease | None] = Future()
        with self._lock:
            if lease_key not in self._kept:
                future.set_exception(LeaseConflict(f"lease {lease_key} is not held by {self.worker_id}"))
                return future
            token = next(self._tokens)
            self._futures[token] = future
        self._apply(lease_key, Ask(Request(token, op, self._monotonic(), target, children)))
        return future

    def _apply(self, lease_key: str, event: keeping.Event | _Vouch, *, wake: bool = True) -> None:
        """Step one lease's state machine and carry out its actions; ``wake``: let the keeper thread
        recompute its next wake when the lease is due before the pass it has planned (every event but
        the thread's own ticks, which would make it spin)."""
        effects: list[Callable[[], None]] = []
        with self._lock:
            kept = self._kept.get(lease_key)
            if kept is None:
                if isinstance(event, Answer):
                    self._sent.pop((lease_key, event.attempt_id), None)
                return
            now = self._monotonic()
            if isinstance(event, _Vouch):
                stepped = keeping.vouch(kept, event.sent_at, now, self.timings)
            else:
                stepped = keeping.step(kept, event, now, self.timings)
            if stepped.kept is None:
                self._kept.pop(lease_key, None)
                self._until.pop(lease_key, None)
                self._due.pop(lease_key, None)
                self._paused.discard(lease_key)
            else:
                self._kept[lease_key] = stepped.kept
                until = keeping.deliver_until(stepped.kept, self.timings)
                self._until[lease_key] = until
                due_at = self._due[lease_key] = keeping.next_wake(stepped.kept, self.timings)
                # the keeper thread's pass is planned for _next_pass: wake it only for something earlier
                wake = wake and due_at < self._next_pass
                self._note_pause(lease_key, until, now, stepped.kept)
            latency = 0.0
            # a heartbeat answers no renewal asked for (it may have been sent before the ask)
            answered: int | None = 0 if isinstance(event, _Vouch) else None
            if isinstance(event, Answer):
                answered = event.attempt_id
                latency = now - self._sent.pop((lease_key, answered), now)
            for action in stepped.actions:
                effects += self._carry_out(lease_key, action, now, latency, stepped.kept, answered)
        for effect in effects:
            effect()
        if wake:
            self._wake.set()

    def _answered_renewals(self, lease_key: str, attempt_id: int | None) -> list[Future[None]]:
        """Under the lock: the renewal waiters answered by ``attempt_id``'s confirmation (None: all,
        the lease is gone), removed from those still waiting."""
        waiting = self._renewals.pop(lease_key, [])
        done = [w for first, w in waiting if attempt_id is None or attempt_id >= first]
        rest = [(first, w) for first, w in waiting if attempt_id is not None and attempt_id < first]
        if rest:
            self._renewals[lease_key] = rest
        return done

    def _note_pause(self, lease_key: str, until: float, now: float, kept: Kept) -> None:
        """Under the lock: log when a lease's records stop (delivery fence ``until`` passed) or flow again."""
        late = now >= until
        if late == (lease_key in self._paused):
            return  # no change: the common case, checked first (every keeper pass looks at every lease)
        if not kept.validated or keeping.releasing(kept):
            return  # adopted and not confirmed yet, or being released: held back by design, not late
        if late:
            self._paused.add(lease_key)
            logger.warning(
                "lease %s: no renewal confirmed in time, records held back (renewals go on until the "
                "table shows another owner)",
                lease_key,
            )
        else:
            self._paused.discard(lease_key)
            logger.info("lease %s renewed again: records flow again", lease_key)

    def _carry_out(
        self,
        lease_key: str,
        action: keeping.Action,
        now: float,
        latency: float,
        kept: Kept | None,
        answered: int | None,
    ) -> list[Callable[[], None]]:
        """Bookkeeping under the lock; returns what must happen after it (calls that may block)."""
        match action:
            case Send():
                self._sent[(lease_key, action.attempt_id)] = now
                pool = self._pool
                write = kept.write if kept is not None else None
                if action.op is Op.CHECKPOINT and write is not None and len(write.attempt_ids) == 1:
                    pool = self._checkpoint_pool  # its first attempt; a twin or a retry keeps the lease
                return [lambda: self._submit(lease_key, action, pool)]
            case Confirmed(lease=lease):
                at = kept.confirmed_at if kept is not None else now
                event = KeeperEvent("confirmed", lease_key, lease, latency_s=latency, confirmed_at=at)
                waiters = self._answered_renewals(lease_key, answered)
                return [lambda: self.notify(event), *(lambda w=w: w.set_result(None) for w in waiters)]
            case Lost(reason=reason, unreadable=unreadable):
                event = KeeperEvent("lost", lease_key, reason=reason, unreadable=unreadable)
                waiters = self._answered_renewals(lease_key, None)
                return [lambda: self.notify(event), *(lambda w=w: w.set_result(None) for w in waiters)]
            case Released():
                waiters = self._answered_renewals(lease_key, None)
                return [
                    lambda: self.notify(KeeperEvent("released", lease_key)),
                    *(lambda w=w: w.set_result(None) for w in waiters),
                ]
            case Done(token=token, lease=lease):
                done = self._futures.pop(token, None)
                return [] if done is None else [lambda: _resolve(done, lease, None)]
            case Failed(token=token, failure=failure, reason=reason):
                failed = self._futures.pop(token, None)
                error = _FAILURES[failure](f"lease {lease_key}: {reason}")
                return [] if failed is None else [lambda: _resolve(failed, None, error)]
            case Judged(op=op, reason=reason):
                logger.info("lease %s: %s settled by a consistent read: %s", lease_key, op.value, reason)
                return []
            case Retrying(op=op, error=error, failures=failures, racing=racing):
                # a twin's failure while its sibling is still out is the race hedging runs, not a fault
                level = logging.WARNING if failures == 1 and not racing else logging.DEBUG
                logger.log(level, "lease %s: %s attempt failed, trying again: %s", lease_key, op.value, error)
                return []

    # -- attempts (pool threads) -----------------------------------------------------------------

    def _submit(self, lease_key: str, send: Send, pool: Executor) -> None:
        with self._lock:
            self._busy += 1
        try:
            pool.submit(self._attempt, lease_key, send)
        except RuntimeError:  # the pool is shut down: the worker is stopping
            self._attempt(lease_key, send, stopping=True)

    def _attempt(self, lease_key: str, send: Send, *, stopping: bool = False) -> None:
        try:
            if stopping:
                answer = Answer(send.attempt_id, Outcome.UNKNOWN, error="the keeper is stopping")
            else:
                answer = self._call(lease_key, send)
            self._apply(lease_key, answer)
        finally:
            with self._lock:
                self._busy -= 1

    def _call(self, lease_key: str, send: Send) -> Answer:
        attempt = send.attempt_id
        what = f"{send.op.value} of lease {lease_key}"
        try:
            if send.op is Op.READ:
                seen = self._table.get_lease(lease_key, consistent=True)
                self.missing_since = None
                return Answer(attempt, Outcome.SEEN, seen)
            if send.op is Op.RENEW:
                written = self._table.renew(send.lease)
            elif send.op is Op.CHECKPOINT:
                assert send.checkpoint is not None
                written = self._table.checkpoint(send.lease, send.checkpoint, child_shard_ids=send.children)
            else:
                written = self._table.release(send.lease)
            self.missing_since = None
            return Answer(attempt, Outcome.WRITTEN, written)
        except (CorruptLeaseItem, LeaseUnreadable) as exc:
            return Answer(attempt, Outcome.UNREADABLE, error=f"{what}: the item cannot be read: {exc}")
        except LeaseConflict as exc:
            return Answer(attempt, Outcome.CONFLICT, error=str(exc))
        except Throttled as exc:
            return Answer(attempt, Outcome.THROTTLED, error=str(exc))
        except DependencyUnavailable as exc:
            if self.missing_since is None:
                self.missing_since = self._monotonic()
            return Answer(attempt, Outcome.MISSING, error=str(exc))
        except KclError as exc:
            return Answer(attempt, Outcome.UNKNOWN, error=str(exc))
        except Exception as exc:  # a bug in a table adapter: the outcome is unknown, the lease is kept
            logger.exception("%s failed unexpectedly", what)
            return Answer(attempt, Outcome.UNKNOWN, error=f"{type(exc).__name__}: {exc}")


def _resolve(future: Future[Lease | None], lease: Lease | None, error: BaseException | None) -> None:
    if future.done():  # the caller gave up on it (cancelled)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(lease)
