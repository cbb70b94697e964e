"""The Spark query as one worker of a KCL fleet: the lease table is the hand-over point.

:class:`LeaseBridge` lives in Spark's source-runner process (one per query) and, with
``leaseTableName`` set:

* **joins**: refuses to start while another worker renews leases (counters moving over one failover
  time, or, with ``leaseRenewal = PER_WORKER``, its heartbeat advancing: a lease kept by heartbeat is
  not free), or waits up to ``leaseWaitTimeoutMs`` for them to stop; then takes every lease of the
  table;
* **holds a lease for every shard it reads**: a shard without one (a table the query started, a new
  shard) gets it created (KCL's shape, the checkpoint the query starts the shard from) and taken before
  a batch reads it, so executors can publish their ends on it;
* **renews** them every renewal period (Java's ``failover / 3 - 25 ms``, contract §4.3) on a supervised
  thread (an error is logged and the loop goes on; a lease another worker took is dropped with an ERROR
  line), so no daemon or Java worker takes them;
* **checkpoints** committed offsets (sub-sequence exact), creating child leases at a shard's end as KCL
  does (:func:`child_leases_at_shard_end`, the daemon's own rule), and never moves a checkpoint back;
* **removes old publications** it finds on the leases it holds (other runs', batches no one needs);
* **releases** the leases on stop.

:func:`write_checkpoints` is the same checkpoint write for another process (the query listener, the
``spark-sync`` command): it re-reads each lease and writes only as its owner or when it is unowned.
Counter-fenced writes that meet a counter moved by our own other process are re-read and adopted when
the owner is still us.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.core.leases.heartbeat import WorkerItem, workers_of
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.timings import LeaseTimings
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import Shard, ShardEndAction, child_leases_at_shard_end
from kcl_daemon.core.spark.leases import (
    checkpoints_to_write,
    children_of,
    heartbeating,
    lease_for_shard,
    live_owners,
    positions_from_leases,
    stale_end_attributes,
)
from kcl_daemon.core.spark.offsets import ShardPos, SourceOffset
from kcl_daemon.errors import KclError, LeaseConflict

logger = logging.getLogger(__name__)


class LeasesHeld(KclError):
    """Other workers hold live leases on the table: stop them first, or set leaseWaitTimeoutMs."""


@dataclass(slots=True)
class CheckpointReport:
    written: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # shard -> why (another owner)
    children_created: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)


def _take_or_adopt(table: DynamoLeaseTable, lease: Lease, owner: str) -> Lease | None:
    """Take ``lease``; if its counter moved meanwhile, re-read: ours (or free) -> take again."""
    for _ in range(3):
        try:
            return table.take(lease, owner)
        except LeaseConflict:
            current = table.get_lease(lease.lease_key, consistent=True)
            if current is None:
                return None
            if current.lease_owner not in (None, owner):
                logger.warning("lease %s was taken by %s meanwhile", lease.lease_key, current.lease_owner)
                return None
            lease = current
    return None


def _checkpoint_one(
    table: DynamoLeaseTable,
    lease: Lease,
    checkpoint: ExtendedSequenceNumber,
    owner: str,
    child_shard_ids: Iterable[str] | None,
) -> tuple[Lease | None, str]:
    """Write ``checkpoint`` as ``owner`` (or into an unowned lease); never backwards."""
    for _ in range(3):
        if lease.lease_owner not in (None, owner):
            return None, f"held by {lease.lease_owner}"
        if lease.checkpoint >= checkpoint and not (checkpoint.is_shard_end and not lease.is_shard_end):
            return lease, "already there"
        try:
            return table.checkpoint(lease, checkpoint, child_shard_ids=child_shard_ids), "written"
        except LeaseConflict:
            current = table.get_lease(lease.lease_key, consistent=True)
            if current is None:
                return None, "the lease is gone"
            lease = current
    return None, "the lease kept changing"


def write_checkpoints(
    table: DynamoLeaseTable,
    offset: SourceOffset,
    shards: Sequence[Shard],
    owner: str,
    *,
    held: dict[str, Lease] | None = None,
    take_children: bool = False,
) -> CheckpointReport:
    """Write every position of ``offset`` that moves a lease forward; create children at shard end.

    ``held`` (the bridge's leases, updated in place) saves a read per lease; without it each lease is
    read consistently first. New child leases are created unowned at TRIM_HORIZON, or taken by
    ``owner`` when ``take_children`` (the running query keeps every lease).
    """
    report = CheckpointReport()
    leases = (
        dict(held)
        if held is not None
        else {lease.shard_id: lease for lease in table.list_leases(consistent=True).leases}
    )
    written = {shard: lease.checkpoint for shard, lease in leases.items()}
    for shard_id, checkpoint in checkpoints_to_write(offset, written).items():
        lease = leases.get(shard_id)
        if lease is None:
            report.refused[shard_id] = "no lease for the shard"
            continue
        children: list[str] | None = None
        if checkpoint.is_shard_end:
            existing = {lease.lease_key for lease in table.list_leases(consistent=True).leases}
            decision = child_leases_at_shard_end(
                lease,
                children_of(shard_id, shards),
                existing_lease_keys=existing,
                rng=random.Random(),  # noqa: S311 - the 1-in-30 give-up, not security
            )
            if decision.action is not ShardEndAction.PROCEED:
                report.refused[shard_id] = decision.reason
                continue
            for child in decision.leases_to_create:
                table.create_lease(child)
                report.children_created.append(child.shard_id)
                if take_children and held is not None:
                    fresh = table.get_lease(child.lease_key, consistent=True)
                    taken = None if fresh is None else _take_or_adopt(table, fresh, owner)
                    if taken is not None:
                        held[child.shard_id] = taken
            children = sorted(decision.child_shard_ids)
        new, why = _checkpoint_one(table, lease, checkpoint, owner, children)
        if new is None:
            report.refused[shard_id] = why
            continue
        if held is not None:
            held[shard_id] = new
        report.written[shard_id] = str(checkpoint)
    return report


def release_owned(table: DynamoLeaseTable, owner: str) -> list[str]:
    """Release every lease ``owner`` still holds (after its process stopped); the shard ids released."""
    released = []
    for lease in table.list_leases(consistent=True).leases:
        current: Lease | None = lease
        for _ in range(3):
            if current is None or current.lease_owner != owner:
                break
            try:
                table.release(current)
                released.append(current.shard_id)
                break
            except LeaseConflict:
                current = table.get_lease(lease.lease_key, consistent=True)
    return released


class LeaseBridge:
    """One query's membership in the fleet (see the module docstring). Thread-safe."""

    def __init__(
        self,
        table: DynamoLeaseTable,
        owner: str,
        *,
        failover_s: float,
        wait_timeout_s: float,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.table = table
        self.owner = owner
        self.failover_s = failover_s
        self.renew_every_s = LeaseTimings.from_failover(failover_s).renew_every_s
        self.wait_timeout_s = wait_timeout_s
        self._sleep = sleep
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._held: dict[str, Lease] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- joining ---------------------------------------------------------------------------------

    def join(self) -> dict[str, ShardPos]:
        """Wait out or refuse live leases, take every lease, start renewing; the table's positions."""
        deadline = self._monotonic() + self.wait_timeout_s
        while True:
            before = self.table.list_leases(consistent=True).leases
            if all(lease.lease_owner in (None, self.owner) for lease in before):
                break
            beats_before = self._heartbeats()
            self._sleep(self.failover_s)
            after = self.table.list_leases(consistent=True).leases
            live = live_owners(before, after, self.owner, heartbeating(beats_before, self._heartbeats()))
            if not live:
                break  # owners that stopped renewing: their leases expired, take them
            owners = sorted({lease.owner for lease in live})
            if self._monotonic() >= deadline:
                raise LeasesHeld(
                    f"lease table {self.table.table_name}: {len(live)} lease(s) are renewed by running "
                    f"worker(s) {', '.join(owners)}; stop them (or set leaseWaitTimeoutMs to wait)"
                )
            logger.info("waiting for worker(s) %s to release %d lease(s)", ", ".join(owners), len(live))
        leases = self.table.list_leases(consistent=True).leases
        for lease in leases:
            taken = _take_or_adopt(self.table, lease, self.owner)
            if taken is not None:
                self._held[taken.shard_id] = taken
        logger.info("took %d lease(s) of %s as %s", len(self._held), self.table.table_name, self.owner)
        self._thread = threading.Thread(target=self._renew_loop, name="spark-lease-renewer", daemon=True)
        self._thread.start()
        return positions_from_leases(leases)

    def _heartbeats(self) -> list[WorkerItem]:
        """The per-worker heartbeats (the fleet's worker-metrics table), unreadable items left out."""
        return workers_of(None, self.table.heartbeat_items())

    def positions(self) -> dict[str, ShardPos]:
        with self._lock:
            return positions_from_leases(self._held.values())

    def held(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._held)

    def ensure_leases(self, shards: Sequence[Shard], positions: Mapping[str, ShardPos]) -> list[str]:
        """Hold a lease for every shard in ``positions`` (shard id -> where the query starts it): take
        one that exists, create and take one that does not. The shard ids it could not hold."""
        by_id = {shard.shard_id: shard for shard in shards}
        missing: list[str] = []
        with self._lock:
            for shard_id in sorted(positions):
                if shard_id in self._held:
                    continue
                current = self.table.get_lease(shard_id, consistent=True)
                if current is None and shard_id in by_id:
                    self.table.create_lease(lease_for_shard(by_id[shard_id], positions[shard_id]))
                    current = self.table.get_lease(shard_id, consistent=True)
                taken = None if current is None else _take_or_adopt(self.table, current, self.owner)
                if taken is None:
                    missing.append(shard_id)
                else:
                    self._held[shard_id] = taken
        if missing:
            logger.error("could not hold the lease(s) of %s", ", ".join(missing))
        return missing

    def stale_ends(self, run: str, keep_from: int) -> dict[str, list[str]]:
        """Publication attributes on the held leases that no batch needs (shard id -> names)."""
        with self._lock:
            found = {
                shard_id: stale_end_attributes(lease.extra, run, keep_from)
                for shard_id, lease in self._held.items()
            }
        return {shard_id: names for shard_id, names in found.items() if names}

    # -- renewing --------------------------------------------------------------------------------

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.renew_every_s):
            try:
                self._renew_all()
            except Exception:  # the loop must outlive any one failure (supervised, logged)
                logger.exception("renewing the query's leases failed; retrying next interval")

    def _renew_all(self) -> None:
        with self._lock:
            for shard_id, lease in list(self._held.items()):
                try:
                    self._held[shard_id] = self.table.renew(lease)
                except LeaseConflict:
                    current = self.table.get_lease(lease.lease_key, consistent=True)
                    if current is not None and current.lease_owner == self.owner:
                        self._held[shard_id] = self.table.renew(current)  # our own other process wrote
                    else:
                        owner = None if current is None else current.lease_owner
                        logger.error(  # noqa: TRY400 - a lost lease is not a traceback
                            "lease %s was taken by %s; dropping it", lease.lease_key, owner
                        )
                        del self._held[shard_id]

    # -- checkpoints and stop --------------------------------------------------------------------

    def checkpoint(self, offset: SourceOffset, shards: Sequence[Shard]) -> CheckpointReport:
        with self._lock:
            report = write_checkpoints(
                self.table, offset, shards, self.owner, held=self._held, take_children=True
            )
        if report.refused:
            logger.warning("checkpoints not written: %s", report.refused)
        return report

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.failover_s)
        with self._lock:
            for shard_id, lease in list(self._held.items()):
                try:
                    self.table.release(lease)
                except LeaseConflict:
                    current = self.table.get_lease(lease.lease_key, consistent=True)
                    if current is not None and current.lease_owner == self.owner:
                        self.table.release(current)
                except KclError as exc:
                    logger.warning("releasing lease %s failed: %s", lease.lease_key, exc)
                del self._held[shard_id]
        logger.info("released the query's leases of %s", self.table.table_name)
