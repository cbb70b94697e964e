"""What a lease write whose outcome is unknown actually did, judged from a consistent re-read.

A 500, a dropped connection or a read timeout can come *after* DynamoDB applied a write, and a retry of
an applied write then fails its condition as if another worker had moved the lease. So after either
(an unknown outcome, or a condition failure) the shell re-reads the item with a consistent read and asks
:func:`reconcile`:

* ``APPLIED``: the item shows exactly what this write produces (our owner with the counter we wrote, and
  for a checkpoint our checkpoint): carry on with the item as read;
* ``NOT_APPLIED``: the item is still as the write found it: the write may be sent again;
* ``LOST``: a different owner or counter: another writer moved the lease, it is no longer ours.

Every owner-side write is fenced on ``leaseCounter = c`` and writes ``c + 1``, so an item at ``c + 1``
with our owner can only be our own write. ``describe`` says what was seen, for the log line.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber


class WriteKind(enum.StrEnum):
    RENEW = "renew"
    TAKE = "take"  # also a steal: the condition is the counter either way
    CHECKPOINT = "checkpoint"  # also the SHARD_END checkpoint
    RELEASE = "release"
    CREATE = "create"  # a new lease (child leases at shard end, shard sync): put if absent


class Verdict(enum.StrEnum):
    APPLIED = "applied"
    NOT_APPLIED = "not applied"
    LOST = "lost"


@dataclass(frozen=True, slots=True)
class LeaseWrite:
    """One write as sent: ``before`` is the lease it was fenced on (for CREATE, the lease to create)."""

    kind: WriteKind
    before: Lease
    worker_id: str
    checkpoint: ExtendedSequenceNumber | None = None  # CHECKPOINT: the target written


@dataclass(frozen=True, slots=True)
class Reconciled:
    verdict: Verdict
    seen: Lease | None
    reason: str  # what was seen and what it means, for the log


def describe(lease: Lease | None) -> str:
    if lease is None:
        return "no such lease"
    owner = lease.lease_owner if lease.lease_owner is not None else "(no owner)"
    return f"owner {owner}, counter {lease.lease_counter}, checkpoint {lease.checkpoint}"


def reconcile(write: LeaseWrite, seen: Lease | None) -> Reconciled:
    """The verdict on ``write`` given ``seen``, the item read (consistently) after the write was sent."""
    shown = f"the table shows {describe(seen)}"
    if write.kind is WriteKind.CREATE:
        if seen is None:
            return Reconciled(Verdict.NOT_APPLIED, None, f"{shown}: not created")
        return Reconciled(Verdict.APPLIED, seen, f"{shown}: the lease exists")
    if seen is None:
        verdict = Verdict.APPLIED if write.kind is WriteKind.RELEASE else Verdict.LOST
        return Reconciled(verdict, None, f"{shown}: the lease was deleted")
    counter = write.before.lease_counter
    me = write.worker_id
    # Not applied: the item is exactly as the write found it (same counter, same owner).
    not_applied = seen.lease_counter == counter and seen.lease_owner == write.before.lease_owner
    ours_next = seen.lease_counter == counter + 1
    match write.kind:
        case WriteKind.RENEW | WriteKind.TAKE:
            applied = ours_next and seen.lease_owner == me
        case WriteKind.CHECKPOINT:
            applied = ours_next and seen.lease_owner == me and seen.checkpoint == write.checkpoint
        case WriteKind.RELEASE:
            applied = ours_next and seen.lease_owner is None
        case WriteKind.CREATE:  # pragma: no cover - answered above
            raise AssertionError(write.kind)
    if applied:
        return Reconciled(Verdict.APPLIED, seen, f"{shown}: our {write.kind} was applied")
    if not_applied:
        return Reconciled(Verdict.NOT_APPLIED, seen, f"{shown}: our {write.kind} was not applied")
    return Reconciled(
        Verdict.LOST,
        seen,
        f"{shown} (we wrote on counter {counter} as {me}): another writer changed it",
    )
