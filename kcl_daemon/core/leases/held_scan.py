"""What a scan of the lease table tells a worker renewing per worker (``leaseRenewal = PER_WORKER``)
about the leases it holds. Pure.

Renewing per lease, a worker learns that a lease moved from its next renewal: the write, fenced on the
counter, fails, or returns the item with a hand-off mark (KCL 3.x: ``leaseOwner`` = the new worker,
``checkpointOwner`` = this one, counter unchanged). Renewing per worker there is no such write, so each
scan tells it instead (the 2.x taker's passes; in 3.x mode the assignment loop's passes, which a
follower then runs every renewal period):

* **lost**: another worker wrote the lease since, at or past the counter held
  (:func:`~kcl_daemon.core.leases.heartbeat.moved_on`): taken, stolen, or assigned elsewhere by the
  leader;
* **marked**: the leader marked a hand-off of a held lease at the counter held: the lease as scanned,
  for the hand-off watcher to serve exactly as it serves a renewal that returned the mark.

A scan older than this worker's own writes shows a lower counter and says nothing. A mark learnt from a
scan is not the keeper's: its heartbeat confirmations carry the lease as last written, without the mark,
and must not wipe it (:func:`confirmed_keeping_mark`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kcl_daemon.core.leases.heartbeat import moved_on
from kcl_daemon.core.leases.lease import Lease


@dataclass(frozen=True, slots=True)
class ScanNews:
    #: (lease key, why) for each held lease another worker wrote since
    lost: tuple[tuple[str, str], ...] = ()
    #: held leases the leader marked for a hand-off, as scanned
    marked: tuple[Lease, ...] = ()


def handoff_marked(held: Lease, seen: Lease, me: str) -> bool:
    """The scan shows a hand-off of ``held`` to another worker, marked at the counter held (and not yet
    known to this worker)."""
    return (
        seen.lease_counter == held.lease_counter
        and seen.checkpoint_owner == me
        and seen.lease_owner not in (None, me)
        and held.checkpoint_owner != me
    )


def scan_news(held: Mapping[str, Lease], seen: Iterable[Lease], me: str) -> ScanNews:
    """The held leases a scan shows lost or marked for a hand-off (``held``: key -> the lease as held)."""
    lost: list[tuple[str, str]] = []
    marked: list[Lease] = []
    for lease in seen:
        mine = held.get(lease.lease_key)
        if mine is None:
            continue
        if moved_on(mine, lease, me):
            lost.append(
                (
                    lease.lease_key,
                    f"the table shows owner {lease.lease_owner} (counter {lease.lease_counter}, held at "
                    f"{mine.lease_counter})",
                )
            )
        elif handoff_marked(mine, lease, me):
            marked.append(lease)
    return ScanNews(tuple(lost), tuple(marked))


def confirmed_keeping_mark(held: Lease, confirmed: Lease) -> Lease:
    """The lease to hold after the keeper confirmed ``confirmed``: a heartbeat's confirmation re-confirms
    the lease as last written (same counter), which must not wipe a hand-off mark a scan showed since
    (only a write moves the counter, and every write that ends a hand-off does)."""
    if (
        confirmed.lease_counter == held.lease_counter
        and held.checkpoint_owner is not None
        and confirmed.checkpoint_owner is None
    ):
        return held
    return confirmed
