"""``LEASE_COUNT_BASED``: Java's ``LeaseCountBasedLeaseAssignmentDecider`` (contract §5.2, last paragraph).

Simple and deterministic (keys and worker ids are sorted), which is what the end-to-end tests want:

* target = ceil(leases / active workers), capped at ``maxLeasesForWorker`` (the 2.x taker's formula);
* expired or unassigned leases go to the least-loaded active worker under ``maxLeasesForWorker``
  (never graceful: their owner is gone);
* then one lease at a time moves from the most- to the least-loaded worker while they differ by more
  than one (graceful hand-offs; leases with a hand-off pending are left alone).

A lease's actual owner is its ``checkpointOwner`` while a hand-off is pending, else its owner. Leases
of workers that are not active (no valid metrics) count for nobody and move only once expired.
Finished (SHARD_END) leases are never assigned.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kcl_daemon.core.leader.decider import (
    DeciderConfig,
    DeciderState,
    Decision,
    LeaseView,
    Move,
    WorkerState,
    WorkerView,
)


class LeaseCountDecider:
    name = "LEASE_COUNT_BASED"

    def decide(
        self,
        leases: Sequence[LeaseView],
        workers: Sequence[WorkerView],
        now: float,
        state: DeciderState,
        config: DeciderConfig,
    ) -> Decision:
        active = sorted(w.worker_id for w in workers if w.state is WorkerState.ACTIVE)
        if not active:
            return Decision((), state)
        live = sorted((lease for lease in leases if not lease.finished), key=lambda lease: lease.lease_key)
        cap = config.max_leases_for_worker
        target = min(max(math.ceil(len(live) / len(active)), 1), cap)
        held: dict[str, list[LeaseView]] = {w: [] for w in active}
        orphans: list[LeaseView] = []
        for lease in live:
            owner = lease.actual_owner
            if owner is None or lease.expired:
                orphans.append(lease)
            if owner in held:
                held[owner].append(lease)  # an active worker's expired lease still counts as its load
        # Expired leases (they have progress to continue) before leases nobody ever held.
        orphans.sort(key=lambda lease: (lease.actual_owner is None, lease.lease_key))
        moves: list[Move] = []

        def least_loaded() -> str | None:
            candidates = [w for w in active if len(held[w]) < cap]
            return min(candidates, key=lambda w: (len(held[w]), w)) if candidates else None

        for lease in orphans:
            owner = lease.actual_owner
            if owner in held:
                held[owner].remove(lease)
            to = least_loaded()
            if to is None:
                if owner in held:
                    held[owner].append(lease)
                break
            moves.append(
                Move(lease.lease_key, lease.lease_counter, lease.owner, to, False, "expired or unassigned")
            )
            held[to].append(lease)
        while True:
            donor = max(active, key=lambda w: (len(held[w]), w))
            to = least_loaded()
            if (
                to is None
                or len(held[donor]) - len(held[to]) <= 1
                or len(held[donor]) <= min(target, cap) - 1
            ):
                break
            movable = [
                lease
                for lease in held[donor]
                if lease.checkpoint_owner is None and lease.owner == donor and not lease.expired
            ]
            if not movable:
                break
            lease = movable[-1]
            held[donor].remove(lease)
            held[to].append(lease)
            moves.append(
                Move(
                    lease.lease_key,
                    lease.lease_counter,
                    donor,
                    to,
                    config.graceful_handoff,
                    "balance by count",
                )
            )
        return Decision(tuple(moves), state)
