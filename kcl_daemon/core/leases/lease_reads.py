"""Renewing per worker (``leaseRenewal = PER_WORKER``): which taker passes read the lease table, and the
steal notices that tell a victim what those scans used to. Pure.

Renewing per lease, the 2.x taker scans the whole lease table at every pass (Java's full runs every
``2 x (L + ε)``, and kcl-daemon's expiry passes about once a second between them). Renewing per
worker, a lease can only expire once its owner's heartbeat has stood still a whole failover (its
counter stands still between checkpoints anyway, and a lease renewed per lease is a foreign sign), so
a pass between full runs needs only the heartbeats, a small read, and scans the lease table only when
:func:`lease_scan_reason` says so:

* a **full run** (with its steals), the first pass, and every pass once the worker fell back;
* **something may be due**: a lease of the last scan whose effective observation (its owner's
  heartbeat, :func:`judged`, re-read with every heartbeat read) was not expired at that scan and is
  now, or is due for eviction; or the heartbeat of any other worker has stood still a failover since
  that scan (a lease it took after the scan is not in it) (:func:`scan_due_at`);
* **leases in motion**: the last scan's plan took or evicted leases (some takes may have lost the race
  and the rest is still to take);
* **the fleet changed** (:func:`fleet_change`): a worker item appeared or vanished (a worker started;
  a worker stopping gracefully releases its leases, then deletes its item), or one changed its kind
  (its mode, a metrics report, lease attributes): the mode is then decided again on a fresh scan, never
  on the owners of an older one.

What the scans between full runs did besides expiry is done otherwise:

* **a lost lease.** A kcl-daemon thief that steals a lease (a balancing steal, in a full run) writes a
  **steal notice** in its own heartbeat item right after it: ``kdst``, a map of lease key to the
  counter the steal wrote (:func:`notice_write`), kept for
  :attr:`~kcl_daemon.core.leases.timings.LeaseTimings.steal_notice_keep_s`. The victim reads it with
  the heartbeats (:func:`noticed_losses`, the rule of
  :func:`~kcl_daemon.core.leases.heartbeat.moved_on`: a counter at or past the one held), and the
  thief delivers nothing for
  :attr:`~kcl_daemon.core.leases.timings.LeaseTimings.per_worker_steal_quiet_s`, two heartbeat reads.
  A lease taken after it expired needs no notice: its owner's heartbeat stood still a failover, so the
  owner stopped by its own deadline first. A lease taken by a worker not in the mode is seen at the
  next scan (that worker is a foreign sign, and the fleet falls back).
* **foreign signs.** A Java 3.x worker's metrics report is an item of the heartbeat place, seen at
  every heartbeat read; a lease owner without a heartbeat (a worker with the key off, a Java 2.x
  worker) is seen at the next lease scan: the next full run of any worker, or sooner when its item
  changes the fleet.

``now`` is monotonic seconds, always passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Final, cast

from kcl_daemon.core.leases.expiry import DUE_EPSILON_S, CounterObservation, LeaseObservations
from kcl_daemon.core.leases.heartbeat import (
    WORKER_KEY,
    HeartbeatObservations,
    HeartbeatWrite,
    WorkerItem,
    vouched,
)
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import LEASE_KEY, Item

#: the steal notices of a worker's heartbeat item: lease key -> the counter its steal wrote
NOTICES: Final = "kdst"


# -- expiry ------------------------------------------------------------------------------------------


def judged(
    leases: Iterable[Lease], observations: LeaseObservations, beats: HeartbeatObservations
) -> LeaseObservations:
    """The taker's view of expiry renewing per worker: a lease whose owner's item heartbeats in
    ``PER_WORKER`` mode is timed by that heartbeat alone (its counter moves only at takes and
    checkpoints, and the owner's own deadline runs from its last confirmed heartbeat, never from those:
    :func:`~kcl_daemon.core.leases.keeping.vouch`); any other owned lease by the later of its counter's
    and its owner's heartbeat's last change (:func:`~kcl_daemon.core.leases.heartbeat.vouched`: a
    lease renewed per lease, or kept by a heartbeat that vanished or turned ``PER_LEASE``). So a
    checkpoint this worker first sees at a full run does not postpone a dead owner's takeover."""
    entries = dict(vouched(leases, observations, beats).entries)
    for lease in leases:
        seen = entries.get(lease.lease_key)
        owner = lease.lease_owner
        if seen is None or owner is None:
            continue
        item = beats.entries.get(owner)
        if item is not None and item.present and item.item.heartbeats and item.beat_at is not None:
            entries[lease.lease_key] = CounterObservation(seen.lease_counter, item.beat_at)
    return LeaseObservations(entries)


# -- which pass reads the lease table ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LastScan:
    """The last lease scan of this worker's taker, as the passes between scans judge it."""

    #: when it was observed (monotonic seconds)
    at: float
    leases: tuple[Lease, ...]
    #: the lease table's own worker items (a single-table layout), carried to heartbeat-only passes
    workers: tuple[Item, ...] = ()
    #: its plan took or evicted leases (not only steals): the next pass scans again
    in_motion: bool = False


def scan_due_at(
    effective: LeaseObservations,
    beats: HeartbeatObservations,
    last: LastScan,
    me: str,
    failover_s: float,
    evict_after_s: float | None = None,
) -> float | None:
    """When a lease scan is next due for expiry (None: nothing can come due): the first lease of
    ``last`` that was not expired at that scan by ``effective`` (its owner's heartbeat folded in), or
    not due for eviction, and would be if nothing moves; or the first other worker's heartbeat that
    had not stood still a failover at that scan (it may own a lease taken since)."""
    dues = [effective.next_expiry(last.at, failover_s)]
    if evict_after_s is not None:
        dues.append(effective.next_expiry(last.at, failover_s + evict_after_s))
    for worker_id, seen in beats.entries.items():
        if worker_id == me or seen.beat_at is None:
            continue
        due = seen.beat_at + failover_s + DUE_EPSILON_S
        if due > last.at:
            dues.append(due)
    return min((due for due in dues if due is not None), default=None)


def lease_scan_reason(
    *,
    per_worker: bool,
    full: bool,
    last: LastScan | None,
    due_at: float | None,
    now: float,
) -> str | None:
    """Why this taker pass reads the lease table; None: the heartbeats alone will do."""
    if not per_worker:
        return "renewing per lease"
    if last is None:
        return "no lease scan yet"
    if full:
        return "a full run"
    if last.in_motion:
        return "the last scan's plan took or evicted leases"
    if due_at is not None and now >= due_at:
        return "a lease or a heartbeat may have come due"
    return None


def _kind(item: WorkerItem) -> tuple[object, ...]:
    """What a heartbeat-only pass may not decide on alone when it changes (not the heartbeat's
    advance, nor a metrics report's new figures)."""
    return (item.heartbeats, item.mode, item.metrics, item.kcl_daemon, item.lease_shaped, item.leased_by)


def fleet_change(before: HeartbeatObservations, after: HeartbeatObservations) -> str | None:
    """How the worker items changed between two heartbeat reads other than by heartbeats advancing
    (None: they did not): an item appeared, vanished, or changed its kind."""
    old, new = before.items, after.items
    appeared = sorted(set(new) - set(old))
    if appeared:
        return f"worker item {', '.join(appeared)} appeared"
    vanished = sorted(set(old) - set(new))
    if vanished:
        return f"worker item {', '.join(vanished)} vanished"
    changed = sorted(worker for worker, item in new.items() if _kind(item) != _kind(old[worker]))
    if changed:
        return f"worker item {', '.join(changed)} changed its kind"
    return None


# -- steal notices --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StealNotice:
    """A steal this worker made renewing per worker: the counter it wrote, and when (monotonic)."""

    lease_counter: int
    at: float


def live_notices(notices: Mapping[str, StealNotice], now: float, keep_s: float) -> dict[str, StealNotice]:
    """The notices still to publish: those written less than ``keep_s`` ago."""
    return {key: notice for key, notice in notices.items() if now - notice.at < keep_s}


def notice_write(write: HeartbeatWrite, notices: Mapping[str, StealNotice]) -> HeartbeatWrite:
    """``write`` (a heartbeat) that also sets this worker's steal notices, or removes them when there
    are none (removing an absent attribute is no error, and costs nothing more)."""
    names = {**write.names, "#notices": NOTICES}
    if not notices:
        return replace(write, update=f"{write.update} REMOVE #notices", names=names)
    value = {"M": {key: {"N": str(n.lease_counter)} for key, n in sorted(notices.items())}}
    values = {**write.values, ":notices": cast(dict[str, str], value)}  # a map, not a plain value
    # the SET clause is the heartbeat's last
    return replace(write, update=f"{write.update}, #notices = :notices", names=names, values=values)


def steal_notices(item: Item) -> dict[str, int]:
    """An item's steal notices (lease key -> counter); entries that are not whole numbers are left out."""
    raw = item.get(NOTICES)
    entries = raw.get("M") if isinstance(raw, Mapping) else None
    if not isinstance(entries, Mapping):
        return {}
    notices: dict[str, int] = {}
    for key, value in entries.items():
        number = value.get("N") if isinstance(value, Mapping) else None
        try:
            notices[str(key)] = int(str(number))
        except ValueError:
            continue
    return notices


def noticed_losses(held: Mapping[str, Lease], items: Iterable[Item], me: str) -> list[tuple[str, str]]:
    """The held leases another worker's steal notice names at or past the counter held (lease key,
    why); a notice older than this worker's own later take of the lease names a lower counter."""
    lost: list[tuple[str, str]] = []
    for item in items:
        thief = item.get(WORKER_KEY, item.get(LEASE_KEY, {})).get("S")
        if not isinstance(thief, str) or thief == me:
            continue
        for key, counter in sorted(steal_notices(item).items()):
            mine = held.get(key)
            if mine is not None and counter >= mine.lease_counter:
                why = f"worker {thief} stole it (its notice: counter {counter}, held at {mine.lease_counter})"
                lost.append((key, why))
    return lost
