"""Per-worker lease renewal (``leaseRenewal = PER_WORKER``): the heartbeat item, expiry read through it,
and the decision whether the fleet may renew that way at all.

In the default mode (``PER_LEASE``, Java's) every worker rewrites every lease it holds each renewal
period. In ``PER_WORKER`` mode a worker rewrites one item of its own instead, its **heartbeat**, and
its leases stand still; the others then judge a lease by its counter *and* its owner's heartbeat:

* **Where.** The heartbeat is the item ``leaseKey = <worker id>`` in the lease table with ``entityType =
  WORKER_METRIC_STATS`` (Java's own kind for a worker's item, contract §3.4 / §3.9) and kcl-daemon's
  attributes ``kdhb`` (N, advanced by each heartbeat) and ``kdrm`` (S, the mode the worker renews in).
  A Java 3.5+ lease listing skips the item (its ``entityType`` is not ``LEASE``), and Java's leader
  ignores a worker-metrics entry without ``lut``; an unknown ``entityType`` would instead be read as a
  lease. Readers older than 3.5 take every item for a lease; such a reader in the fleet is a foreign
  sign (below), and the mode is only for fleets of kcl-daemon workers.
* **The write.** One UpdateItem per renewal period, ``ADD kdhb 1`` and ``SET kdrm, entityType``, on the
  condition that the item is not a lease (no ``leaseOwner`` or ``leaseCounter``, and ``entityType`` is
  absent or Java's worker-metrics kind): it never lands on a shard's lease or on an item a Java worker
  took for one.
* **Expiry.** A lease is expired when its counter *and* its owner's heartbeat have both stood still
  for more than the failover time, each judged by when this worker saw it change, on its own monotonic
  clock, never by comparing clocks (the same rules as :mod:`~kcl_daemon.core.leases.expiry`: a
  heartbeat first seen counts as changed at that scan). So a lease renewed per lease (a worker in the
  default mode, or one that fell back) is never taken while its counter moves, and a lease kept by
  a heartbeat never while the heartbeat moves. :func:`vouched` folds the heartbeats into a
  :class:`LeaseObservations`, so every rule built on it (the 2.x taker, eviction, next expiry) reads
  them unchanged.
* **The mode.** ``PER_WORKER`` only while every sign says the fleet is kcl-daemon workers in that mode
  (:func:`decide`); any foreign sign yields ``PER_LEASE`` with the reason: a lease owner without a
  heartbeat in ``PER_WORKER`` mode (a worker with the key off, a Java worker, or one that fell back),
  a worker-metrics item without kcl-daemon's marks (a Java worker) or a kcl-daemon one without a
  heartbeat that is alive, and a heartbeat item carrying lease attributes (a Java-shaped renewal: an
  older Java worker took the item for a lease). A counter-only change of a lease is *not* a sign by
  itself: kcl-daemon renews a lease adopted from a leader once, and the owner of any lease renewed
  that way by a foreign worker has no heartbeat, which is a sign already. Falling back is for the
  process's life (:func:`settle`); the worker then deletes its heartbeat item
  (:func:`heartbeat_withdrawal`), which the others see as an owner without one. A heartbeat that
  vanishes, or turns to ``PER_LEASE``, vouches no longer but counts as standing still from its last
  advance (:class:`ItemObservation`), so the leases it kept stay safe until their counters move.

``now`` is monotonic seconds, always passed in.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from kcl_daemon.core.leases.expiry import CounterObservation, LeaseObservations
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import (
    ENTITY_TYPE,
    LEASE_COUNTER,
    LEASE_KEY,
    LEASE_OWNER,
    Item,
)

#: Java's kind for a worker's own item (contract §3.4): skipped by lease listings, ignored as metrics
#: without ``lut``
WORKER_ITEM_TYPE: Final = "WORKER_METRIC_STATS"
BEAT: Final = "kdhb"
MODE: Final = "kdrm"
#: attributes a Java worker-metrics item has (contract §3.9); kcl-daemon's own carries ``kdx`` too
JAVA_METRICS: Final = "lut"
KCL_DAEMON_MARK: Final = "kdx"


class RenewalMode(enum.StrEnum):
    PER_LEASE = "PER_LEASE"
    PER_WORKER = "PER_WORKER"


# -- the item ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkerItem:
    """A worker's own item in the lease table, as read: its heartbeat and the marks that tell who wrote it."""

    worker_id: str
    beat: int | None = None  # None: no heartbeat attribute
    mode: RenewalMode | None = None
    #: ``lut`` is there (a worker-metrics report, Java's or kcl-daemon's)
    metrics: bool = False
    #: kcl-daemon's ``kdx`` mark is there (its 3.x worker-metrics reporter writes it)
    kcl_daemon: bool = False
    #: lease attributes on it: an older Java worker took the item for a lease
    leased_by: str | None = None
    lease_shaped: bool = False

    #: the raw ``lut`` value: each metrics report changes it
    metrics_seen: object = None

    @property
    def version(self) -> tuple[object, ...]:
        """What changes when the worker writes (its heartbeat, or its metrics report)."""
        return (self.beat, self.mode, self.metrics_seen)

    @property
    def heartbeats(self) -> bool:
        """A kcl-daemon heartbeat in ``PER_WORKER`` mode."""
        return self.beat is not None and self.mode is RenewalMode.PER_WORKER


class CorruptWorkerItem(ValueError):
    """A worker item whose heartbeat attributes have the wrong type."""


def is_worker_item(item: Item) -> bool:
    entity = item.get(ENTITY_TYPE)
    return isinstance(entity, Mapping) and entity.get("S") == WORKER_ITEM_TYPE


def worker_item_from(item: Item) -> WorkerItem:
    """Decode a ``WORKER_METRIC_STATS`` item of the lease table (:func:`is_worker_item` first)."""
    key = item.get(LEASE_KEY, {}).get("S")
    if not isinstance(key, str) or not key:
        raise CorruptWorkerItem("a worker item without a string leaseKey")
    beat: int | None = None
    raw_beat = item.get(BEAT)
    if raw_beat is not None:
        text = raw_beat.get("N")
        try:
            beat = int(str(text))
        except ValueError:
            raise CorruptWorkerItem(f"worker item {key}: {BEAT} is not a whole number: {text!r}") from None
    mode: RenewalMode | None = None
    raw_mode = item.get(MODE)
    if raw_mode is not None:
        try:
            mode = RenewalMode(str(raw_mode.get("S")))
        except ValueError:
            raise CorruptWorkerItem(f"worker item {key}: {MODE} is {raw_mode!r}") from None
    owner = item.get(LEASE_OWNER, {}).get("S")
    return WorkerItem(
        worker_id=key,
        beat=beat,
        mode=mode,
        metrics=JAVA_METRICS in item,
        kcl_daemon=KCL_DAEMON_MARK in item,
        leased_by=owner if isinstance(owner, str) else None,
        lease_shaped=LEASE_OWNER in item or LEASE_COUNTER in item,
        metrics_seen=_plain(item.get(JAVA_METRICS)),
    )


def heartbeat_withdrawal(worker_id: str) -> HeartbeatWrite:
    """Delete ``worker_id``'s heartbeat item after a fall-back, unless it is more than a heartbeat (a
    worker-metrics report is on it, or a Java worker took it for a lease): then nothing is deleted."""
    return HeartbeatWrite(
        key={LEASE_KEY: {"S": worker_id}},
        update="",
        condition=(
            "#type = :type AND attribute_not_exists(#lut) AND attribute_not_exists(#owner) "
            "AND attribute_not_exists(#counter)"
        ),
        names={"#type": ENTITY_TYPE, "#lut": JAVA_METRICS, "#owner": LEASE_OWNER, "#counter": LEASE_COUNTER},
        values={":type": {"S": WORKER_ITEM_TYPE}},
    )


def workers_of(scan: object) -> list[WorkerItem]:
    """The readable worker items a lease-table scan carried (``workers``; none when it has no such
    field); corrupt ones are left out (the taker's shell warns about them)."""
    items = []
    for raw in getattr(scan, "workers", ()):
        try:
            items.append(worker_item_from(raw))
        except CorruptWorkerItem:
            continue
    return items


def _plain(value: object) -> object:
    return None if not isinstance(value, Mapping) else tuple(sorted((k, str(v)) for k, v in value.items()))


@dataclass(frozen=True, slots=True)
class HeartbeatWrite:
    """The arguments of one heartbeat UpdateItem (the shell adds the table name)."""

    key: dict[str, dict[str, str]]
    update: str
    condition: str
    names: dict[str, str]
    values: dict[str, dict[str, str]]


def heartbeat_write(worker_id: str, mode: RenewalMode) -> HeartbeatWrite:
    """Advance ``worker_id``'s heartbeat and state its mode; never on a lease or a leased item."""
    return HeartbeatWrite(
        key={LEASE_KEY: {"S": worker_id}},
        update="ADD #beat :one SET #mode = :mode, #type = :type",
        condition=(
            "(attribute_not_exists(#key) OR #type = :type) "
            "AND attribute_not_exists(#owner) AND attribute_not_exists(#counter)"
        ),
        names={
            "#beat": BEAT,
            "#mode": MODE,
            "#type": ENTITY_TYPE,
            "#key": LEASE_KEY,
            "#owner": LEASE_OWNER,
            "#counter": LEASE_COUNTER,
        },
        values={":one": {"N": "1"}, ":mode": {"S": mode.value}, ":type": {"S": WORKER_ITEM_TYPE}},
    )


# -- observing heartbeats ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ItemObservation:
    """One worker item as last seen, and when it was last seen to change (monotonic seconds)."""

    item: WorkerItem
    changed_at: float
    #: seen to change since first seen, or first seen after this worker's first scan: written lately
    live: bool
    #: when it was last seen to advance as a PER_WORKER heartbeat (None: never): what vouches for the
    #: worker's leases. A later write in another mode, or the item's deletion, leaves it as it was: the
    #: heartbeat then stands still, and the leases it kept expire from it unless their counters move.
    beat_at: float | None = None
    #: in the last scan (False: gone since; kept until it can no longer vouch for anything)
    present: bool = True


_NONE: Final[Mapping[str, ItemObservation]] = MappingProxyType({})
#: a vanished item is forgotten once its heartbeat has stood still this long (far past any failover)
FORGET_AFTER_S: Final = 3600.0


@dataclass(frozen=True, slots=True)
class HeartbeatObservations:
    """``worker id -> ItemObservation`` on this worker's clock; every update returns a new table. An
    item first seen counts as changed at that scan (like an owned lease)."""

    entries: Mapping[str, ItemObservation] = field(default_factory=lambda: _NONE)
    #: when the first scan was observed (None: not yet)
    since: float | None = None

    def observe(self, items: Iterable[WorkerItem], now: float) -> HeartbeatObservations:
        """The table after a full scan that returned ``items`` at ``now``."""
        first = self.since is None
        entries: dict[str, ItemObservation] = {}
        for item in items:
            old = self.entries.get(item.worker_id)
            beat = now if item.heartbeats else None
            if old is None:
                entries[item.worker_id] = ItemObservation(item, now, not first, beat)
            elif old.present and old.item.version == item.version:
                entries[item.worker_id] = ItemObservation(item, old.changed_at, old.live, old.beat_at)
            else:
                entries[item.worker_id] = ItemObservation(
                    item, now, True, beat if beat is not None else old.beat_at
                )
        for worker_id, old in self.entries.items():
            if worker_id not in entries and now - old.changed_at <= FORGET_AFTER_S:
                entries[worker_id] = ItemObservation(old.item, old.changed_at, old.live, old.beat_at, False)
        return HeartbeatObservations(MappingProxyType(entries), now if first else self.since)

    def record_beat(self, item: WorkerItem, sent_at: float) -> HeartbeatObservations:
        """This worker's own heartbeat, confirmed as ``item``, its write sent at ``sent_at``."""
        entries = dict(self.entries)
        old = entries.get(item.worker_id)
        beat = sent_at if item.heartbeats else (old.beat_at if old is not None else None)
        entries[item.worker_id] = ItemObservation(item, sent_at, True, beat)
        return HeartbeatObservations(MappingProxyType(entries), self.since)

    @property
    def items(self) -> Mapping[str, WorkerItem]:
        """The items in the last scan."""
        return {key: seen.item for key, seen in self.entries.items() if seen.present}

    def beat_changed_at(self, worker_id: str) -> float | None:
        """When the worker's heartbeat was last seen to advance (None: never seen to)."""
        seen = self.entries.get(worker_id)
        return None if seen is None else seen.beat_at

    def alive(self, worker_id: str, now: float, failover_s: float) -> bool:
        """The worker's item was seen written within the failover time (a stale item is not)."""
        seen = self.entries.get(worker_id)
        return seen is not None and seen.present and seen.live and now - seen.changed_at <= failover_s


def vouched(
    leases: Iterable[Lease], observations: LeaseObservations, beats: HeartbeatObservations
) -> LeaseObservations:
    """``observations`` with each owned lease timed from the later of its counter's last change and
    its owner's heartbeat's: expired only when both stood still (the taker's and the leader's rules
    read the result unchanged). Leases of owners without a heartbeat keep their counter's time."""
    entries = dict(observations.entries)
    for lease in leases:
        seen = entries.get(lease.lease_key)
        if seen is None or lease.lease_owner is None:
            continue
        beat_at = beats.beat_changed_at(lease.lease_owner)
        if beat_at is not None and beat_at > seen.changed_at:
            entries[lease.lease_key] = CounterObservation(seen.lease_counter, beat_at)
    return LeaseObservations(entries)


def is_expired(
    lease: Lease,
    observations: LeaseObservations,
    beats: HeartbeatObservations,
    now: float,
    failover_s: float,
) -> bool:
    """Counter and owner's heartbeat both unchanged for more than ``failover_s`` (or never seen)."""
    return vouched([lease], observations, beats).is_expired(lease.lease_key, now, failover_s)


# -- the mode ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModeDecision:
    mode: RenewalMode
    reason: str


def foreign_signs(
    leases: Iterable[Lease],
    beats: HeartbeatObservations,
    me: str,
    now: float,
    failover_s: float,
) -> list[str]:
    """Every sign, in the last scan, of a worker not renewing per worker (empty: none)."""
    signs: list[str] = []
    owners = {lease.lease_owner for lease in leases if lease.lease_owner is not None}
    for worker_id, item in sorted(beats.items.items()):
        if worker_id == me and not item.lease_shaped:
            continue  # this worker's own mode is what it decides
        if item.lease_shaped:
            by = f" by {item.leased_by}" if item.leased_by else ""
            signs.append(f"worker item {worker_id} was written as a lease{by} (a Java worker older than 3.5)")
        elif item.beat is None:
            alive = beats.alive(worker_id, now, failover_s)
            if item.metrics and not item.kcl_daemon and (alive or worker_id in owners):
                signs.append(f"worker {worker_id} publishes Java worker metrics (a Java 3.x worker)")
            elif worker_id in owners or alive:
                signs.append(f"worker {worker_id} writes no heartbeat (leaseRenewal is off there)")
        elif item.mode is not RenewalMode.PER_WORKER and worker_id in owners:
            signs.append(f"worker {worker_id} renews per lease ({MODE} = {item.mode})")
    for owner in sorted(owners - set(beats.items) - {me}):
        signs.append(f"lease owner {owner} has no heartbeat item (a worker not in PER_WORKER mode)")
    return signs


def decide(
    configured: RenewalMode,
    leases: Iterable[Lease],
    beats: HeartbeatObservations,
    me: str,
    now: float,
    failover_s: float,
) -> ModeDecision:
    """``PER_WORKER`` only when configured and no sign says otherwise; else ``PER_LEASE``, with why."""
    if configured is RenewalMode.PER_LEASE:
        return ModeDecision(RenewalMode.PER_LEASE, "leaseRenewal is PER_LEASE")
    signs = foreign_signs(list(leases), beats, me, now, failover_s)
    if signs:
        return ModeDecision(RenewalMode.PER_LEASE, "; ".join(signs))
    return ModeDecision(RenewalMode.PER_WORKER, "every lease owner heartbeats in PER_WORKER mode")


def settle(current: ModeDecision, decided: ModeDecision) -> ModeDecision:
    """The mode after a decision: a fall-back is kept for the life of the process (never flaps)."""
    if current.mode is RenewalMode.PER_LEASE:
        return current
    return decided


def moved_on(held: Lease, seen: Lease, me: str) -> bool:
    """A scan shows a lease this worker holds written by another worker since (taken or stolen): with
    no renewal write of its own, a worker renewing per worker learns it from its scans. Only a counter
    past the one held counts, so a scan older than this worker's own take is not a loss."""
    ours = seen.lease_owner == me or seen.checkpoint_owner == me
    return not ours and seen.lease_counter > held.lease_counter
