"""The lease writes of `kcl-daemon checkpoint set`: a new checkpoint, written only on the lease as read.

Every write is one ``UpdateItem`` fenced on the ``leaseCounter`` that was read (contract §4.2) plus the
ownership it relies on, and bumps the counter, so a worker that read the lease before cannot write over
it (its next renew, take or checkpoint fails its condition) and a worker that takes it afterwards reads
the new checkpoint with its take:

* :meth:`CheckpointWriter.rewrite_unowned`: ``leaseCounter = :read AND attribute_not_exists(leaseOwner)
  AND attribute_not_exists(checkpointOwner)``;
* :meth:`CheckpointWriter.rewrite_owned`: ``leaseCounter = :read AND leaseOwner = :owner`` (an expired
  owner's lease, or one the tool holds after a hand-off), which also releases it (``REMOVE
  leaseOwner, checkpointOwner``) so the fleet takes it at once, from the new checkpoint.

Both SET ``checkpoint``, ``checkpointSubSequenceNumber``, ``ownerSwitchesSinceCheckpoint = 0``, REMOVE the
pending-checkpoint attributes, and SET :data:`AUDIT_ATTRIBUTE`: who changed the checkpoint, when, from
what, to what and why (a map Java ignores, contract §3.2). A failed condition raises
:class:`~kcl_daemon.errors.LeaseConflict` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kcl_daemon.aws.lease_table import CHECKPOINT_OWNER, _Expression, _n, _s
from kcl_daemon.aws.lease_table_3x import LeaseTable3x
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import (
    CHECKPOINT,
    CHECKPOINT_SUB,
    LEASE_COUNTER,
    LEASE_OWNER,
    OWNER_SWITCHES,
    PENDING_CHECKPOINT,
    PENDING_CHECKPOINT_STATE,
    PENDING_CHECKPOINT_SUB,
)
from kcl_daemon.core.sequence import ExtendedSequenceNumber

#: kcl-daemon's record of the last checkpoint change made with `kcl-daemon checkpoint set` (contract §3.2)
AUDIT_ATTRIBUTE: Final = "kclDaemonCheckpointSet"


def _typed(value: object) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int):
        return _n(value)
    return _s(str(value))


class CheckpointWriter(LeaseTable3x):
    """The lease table (2.x and 3.x operations), with the two checkpoint rewrites."""

    def rewrite_unowned(
        self, lease: Lease, target: ExtendedSequenceNumber, audit: Mapping[str, object]
    ) -> Lease:
        expr = self._fenced(lease)
        expr.require_absent(LEASE_OWNER)
        expr.require_absent(CHECKPOINT_OWNER)
        self._rewrite(lease, expr, target, audit)
        return self._update(lease.lease_key, expr, f"set checkpoint {target} of the unowned")

    def rewrite_owned(
        self, lease: Lease, target: ExtendedSequenceNumber, audit: Mapping[str, object]
    ) -> Lease:
        if lease.lease_owner is None:
            raise ValueError(f"lease {lease.lease_key} has no owner")
        expr = self._fenced(lease)
        expr.require_equal(LEASE_OWNER, _s(lease.lease_owner))
        self._rewrite(lease, expr, target, audit)
        expr.remove(LEASE_OWNER)
        expr.remove(CHECKPOINT_OWNER)
        return self._update(lease.lease_key, expr, f"set checkpoint {target} and release the")

    @staticmethod
    def _rewrite(
        lease: Lease, expr: _Expression, target: ExtendedSequenceNumber, audit: Mapping[str, object]
    ) -> None:
        expr.set(LEASE_COUNTER, _n(lease.lease_counter + 1))
        expr.set(CHECKPOINT, _s(target.sequence_number))
        expr.set(CHECKPOINT_SUB, _n(target.sub_sequence_number))
        expr.set(OWNER_SWITCHES, _n(0))
        expr.remove(PENDING_CHECKPOINT)
        expr.remove(PENDING_CHECKPOINT_SUB)
        expr.remove(PENDING_CHECKPOINT_STATE)
        expr.set(AUDIT_ATTRIBUTE, {"M": {name: _typed(value) for name, value in audit.items()}})
