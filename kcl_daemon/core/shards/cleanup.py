"""When may a finished parent lease be deleted? (contract §6.5, Java ``LeaseCleanupManager``'s
completed-shard path)

A SHARD_END lease is deleted only when processing has demonstrably moved on to its children:

* every child lease exists (a missing one means "retry later", never "delete");
* no child checkpoint is still ``TRIM_HORIZON`` or ``AT_TIMESTAMP``, i.e. every child has checkpointed;
* none of the parent's own parent leases exist, so ancestors are deleted oldest first.

Two guards go beyond Java, both on the side of keeping the lease: a lease that is not at SHARD_END is
never deletable, and neither is one whose child shard ids are unknown (Java would delete it, because
"every child lease exists" is vacuously true; a shard sync would then lease its unlisted children from
the initial position, which from LATEST skips data). The garbage path (shard gone: delete
unconditionally) needs no decision and stays in the shell.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from kcl_daemon.core.leases.lease import Lease, lease_key_for
from kcl_daemon.core.sequence import AT_TIMESTAMP, TRIM_HORIZON

_NOT_STARTED = (TRIM_HORIZON, AT_TIMESTAMP)


class CleanupOutcome(enum.StrEnum):
    DELETE = "delete"
    KEEP = "keep"  # re-enqueue and look again at the next cleanup run
    ALREADY_GONE = "already_gone"  # counts as cleaned


@dataclass(frozen=True, slots=True)
class CleanupDecision:
    outcome: CleanupOutcome
    reason: str
    missing_child_leases: tuple[str, ...] = ()
    unstarted_child_leases: tuple[str, ...] = ()
    remaining_parent_leases: tuple[str, ...] = ()

    @property
    def deletable(self) -> bool:
        return self.outcome is CleanupOutcome.DELETE


def parent_lease_deletable(
    parent_lease: Lease | None,
    existing_leases: Iterable[Lease],
    *,
    child_shard_ids: Collection[str] | None = None,
) -> CleanupDecision:
    """Decide the completed-shard cleanup of ``parent_lease`` (as just re-read; ``None`` if gone).

    ``existing_leases`` must contain every existing lease among the children and the parent's own
    parents (a scan, or the results of reading those keys); others are ignored. ``child_shard_ids``
    defaults to the lease's ``childShardIds``; pass the service's answer when those are empty.
    """
    if parent_lease is None:
        return CleanupDecision(CleanupOutcome.ALREADY_GONE, "lease is no longer in the table")
    key = parent_lease.lease_key
    if not parent_lease.is_shard_end:
        return CleanupDecision(
            CleanupOutcome.KEEP, f"{key} is at {parent_lease.checkpoint}, not SHARD_END; never deleted"
        )
    children = sorted(parent_lease.child_shard_ids if child_shard_ids is None else child_shard_ids)
    if not children:
        return CleanupDecision(CleanupOutcome.KEEP, f"{key}: child shard ids are unknown")

    found = {lease.lease_key: lease for lease in existing_leases}
    stream = parent_lease.stream
    missing: list[str] = []
    unstarted: list[str] = []
    for child in children:
        child_lease = found.get(lease_key_for(child, stream))
        if child_lease is None:
            missing.append(child)
        elif child_lease.checkpoint in _NOT_STARTED:
            unstarted.append(child)
    remaining = [
        parent for parent in sorted(parent_lease.parent_shard_ids) if lease_key_for(parent, stream) in found
    ]

    problems = []
    if missing:
        problems.append(f"child leases missing: {', '.join(missing)}")
    if unstarted:
        problems.append(f"children not started (TRIM_HORIZON/AT_TIMESTAMP): {', '.join(unstarted)}")
    if remaining:
        problems.append(f"own parent leases still present: {', '.join(remaining)}")
    if problems:
        return CleanupDecision(
            CleanupOutcome.KEEP,
            f"{key} kept: {'; '.join(problems)}",
            tuple(missing),
            tuple(unstarted),
            tuple(remaining),
        )
    return CleanupDecision(
        CleanupOutcome.DELETE,
        f"{key} is complete and processing of its children ({', '.join(children)}) has begun",
    )
