"""What `kcl-daemon checkpoint set` does to each lease, decided from what was read. Pure.

A lease is read twice, ``window_s`` apart (the failover time), to tell a live owner (its counter moved)
from a dead one (unchanged for the whole failover time: it has given the lease up by its own clock,
contract §4.3). Then, per lease:

=====================================  ====================================================================
the lease                              what happens
=====================================  ====================================================================
not in the table                       refused
finished (``SHARD_END``)               refused: its children are processed already
at the target already                  nothing
no owner                               ``WRITE``: one write fenced on the counter and on there being no owner
owner dead (expired)                   ``WRITE_RELEASE``: one write fenced on the counter and the owner; it
                                       also removes the owner, so the fleet takes the lease from the new
                                       checkpoint
owner alive, no ``--handoff``          refused: a live worker processes it; writing under it would make it
                                       go on from a checkpoint it did not expect or lose its next one
owner alive, ``--handoff``             ``HANDOFF``: the lease is first taken from its owner by the fleet's own
                                       protocol (KCL 3.x: a graceful hand-off through ``checkpointOwner``,
                                       contract §5.3; KCL 2.x: a counter-fenced take, then held for one
                                       failover time so the old owner's local expiry has passed), then
                                       ``WRITE_RELEASE``
=====================================  ====================================================================

Every write is counter-fenced, so a worker that read the lease before the change can write nothing after
it, and whichever worker takes the lease next reads the new checkpoint with its take.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber


class Action(enum.StrEnum):
    WRITE = "write"
    WRITE_RELEASE = "write and release"
    HANDOFF = "hand-off, write and release"
    NOTHING = "nothing to do"
    REFUSE = "refused"


class Liveness(enum.StrEnum):
    UNOWNED = "unowned"
    LIVE = "live"  # its counter moved between the two reads
    EXPIRED = "expired"  # unchanged for at least the failover time
    UNKNOWN = "not observed"  # owned, and not watched long enough to tell: treated as live


@dataclass(frozen=True, slots=True)
class Step:
    lease_key: str
    action: Action
    reason: str
    current: ExtendedSequenceNumber | None = None
    target: ExtendedSequenceNumber | None = None
    owner: str | None = None
    liveness: Liveness = Liveness.UNOWNED

    def as_json(self) -> dict[str, object]:
        return {
            "leaseKey": self.lease_key,
            "action": str(self.action),
            "reason": self.reason,
            "owner": self.owner,
            "liveness": str(self.liveness),
            "from": None if self.current is None else str(self.current),
            "to": None if self.target is None else str(self.target),
        }


def liveness(first: Lease, second: Lease | None, window_s: float, failover_s: float) -> Liveness:
    """How the owner of ``first`` is doing, from a second read ``window_s`` later (None: not read)."""
    latest = second or first
    if latest.lease_owner is None and latest.checkpoint_owner is None:
        return Liveness.UNOWNED
    if second is None:
        return Liveness.UNKNOWN
    if (
        second.lease_counter == first.lease_counter
        and second.lease_owner == first.lease_owner
        and window_s >= failover_s
    ):
        return Liveness.EXPIRED
    if second.lease_counter != first.lease_counter:
        return Liveness.LIVE
    return Liveness.UNKNOWN


def plan_step(
    lease_key: str,
    first: Lease | None,
    second: Lease | None,
    target: ExtendedSequenceNumber | None,
    *,
    handoff: bool,
    window_s: float,
    failover_s: float,
    target_problem: str | None = None,
) -> Step:
    """The step for one lease; ``target`` None with ``target_problem`` when it could not be resolved."""
    latest = second or first
    if latest is None:
        return Step(lease_key, Action.REFUSE, "no such lease in the table")
    current = latest.checkpoint
    if latest.is_shard_end:
        return Step(
            lease_key,
            Action.REFUSE,
            "the shard is finished (SHARD_END): its child shards are processed already; rewinding it "
            "would process it again beside them",
            current,
            target,
            latest.lease_owner,
        )
    if target is None:
        return Step(
            lease_key, Action.REFUSE, target_problem or "no target", current, None, latest.lease_owner
        )
    state = liveness(first or latest, second, window_s, failover_s)
    owner = latest.lease_owner or latest.checkpoint_owner
    if current == target:
        return Step(
            lease_key, Action.NOTHING, f"the checkpoint is {target} already", current, target, owner, state
        )
    if state is Liveness.UNOWNED:
        return Step(lease_key, Action.WRITE, "no worker holds it", current, target, owner, state)
    if state is Liveness.EXPIRED:
        return Step(
            lease_key,
            Action.WRITE_RELEASE,
            f"its owner {owner} has not renewed it for {window_s:.0f}s (expired)",
            current,
            target,
            owner,
            state,
        )
    if handoff:
        return Step(
            lease_key,
            Action.HANDOFF,
            f"held by {owner}: taken over from it first",
            current,
            target,
            owner,
            state,
        )
    seen = "renewed it while we watched" if state is Liveness.LIVE else "holds it"
    return Step(
        lease_key,
        Action.REFUSE,
        f"{owner} {seen}: a live worker is processing this shard. Stop the fleet, or use --handoff to "
        "take the lease from it first",
        current,
        target,
        owner,
        state,
    )


def plan(
    keys: Sequence[str],
    first: Mapping[str, Lease],
    second: Mapping[str, Lease] | None,
    targets: Mapping[str, ExtendedSequenceNumber | None],
    *,
    handoff: bool,
    window_s: float,
    failover_s: float,
    target_problems: Mapping[str, str] | None = None,
) -> list[Step]:
    problems = target_problems or {}
    return [
        plan_step(
            key,
            first.get(key),
            None if second is None else second.get(key),
            targets.get(key),
            handoff=handoff,
            window_s=window_s,
            failover_s=failover_s,
            target_problem=problems.get(key),
        )
        for key in keys
    ]


def audit_record(
    by: str,
    at_ms: int,
    before: ExtendedSequenceNumber,
    after: ExtendedSequenceNumber,
    reason: str | None,
    how: Action,
) -> dict[str, object]:
    """The ``kclDaemonCheckpointSet`` map: who changed the checkpoint, when, from what, to what, how, why."""
    record: dict[str, object] = {
        "by": by,
        "at": at_ms,
        "from": str(before),
        "to": str(after),
        "how": str(how),
    }
    if reason:
        record["reason"] = reason
    return record


@dataclass(frozen=True, slots=True)
class Positioned:
    """A record's position: (sequence number, the last sub-sequence number it holds)."""

    sequence_number: str
    last_sub_sequence_number: int = 0


def checkpoint_before(
    records: Sequence[Positioned], first_wanted: str | None
) -> ExtendedSequenceNumber | None:
    """The checkpoint that makes ``first_wanted`` the next record processed: the last of ``records`` (in
    shard order) before it, all of its sub-records done. None when no record comes before it (then
    ``TRIM_HORIZON`` starts at it). ``first_wanted`` None: after the last record of ``records``."""
    limit = None if first_wanted is None else int(first_wanted)
    before = [r for r in records if limit is None or int(r.sequence_number) < limit]
    if not before:
        return None
    last = max(before, key=lambda r: int(r.sequence_number))
    return ExtendedSequenceNumber(last.sequence_number, last.last_sub_sequence_number)
