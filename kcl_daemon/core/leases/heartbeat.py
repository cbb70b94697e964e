"""Per-worker lease renewal (``leaseRenewal = PER_WORKER``): the heartbeat item, expiry read through it,
and the decision whether the fleet may renew that way at all.

In the default mode (``PER_LEASE``, Java's) every worker rewrites every lease it holds each renewal
period. In ``PER_WORKER`` mode a worker rewrites one item of its own instead, its **heartbeat**, and
its leases stand still; the others then judge a lease by its counter *and* its owner's heartbeat:

* **Where.** The heartbeat is two attributes of the worker's own item in the worker-metrics table of
  the KCL 3.0-3.4 layout (``<app>-WorkerMetricStats``, key ``wid`` = the worker id; its name from
  :mod:`kcl_daemon.core.leader.table_names`): ``kdhb`` (N, advanced by each heartbeat) and ``kdrm``
  (S, the mode the worker renews in). It shares the item with the worker's metrics report when it
  publishes one. Never in the lease table: a Java worker older than 3.5 reads every item there as a
  lease and fails its whole lease listing on one without ``leaseCounter``. Java 2.x never reads the
  worker-metrics table; Java 3.0-3.4 (and 3.5 in that layout) read it as worker metrics, where an
  item's unknown attributes are ignored. A heartbeat without a metrics report also sets ``lut`` to 0
  when absent, so that Java reads a dead "default metric" worker (never assigned anything, deleted by
  its leader's stale-entry clean-up a day on) rather than an entry without ``lut``, which its 2.x->3.x
  readiness monitor cannot read (contract §3.9).
* **Other workers' items.** The same table holds the metrics reports of Java 3.x workers (``lut``
  without kcl-daemon's marks): foreign signs (below). Worker-metrics items in the lease table itself
  (``entityType = WORKER_METRIC_STATS``, the 3.5 single-table layout) are read too, for the same signs.
* **The write.** One UpdateItem per renewal period, ``ADD kdhb 1``, ``SET kdrm`` and ``lut`` if
  absent, on the condition that the item is not a lease (no ``leaseOwner`` or ``leaseCounter``).
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
  a live worker-metrics item without kcl-daemon's marks (a Java 3.x worker: a 3.1.3 worker's first
  report comes seconds after it starts, before its taker judges any lease expired), a kcl-daemon
  worker-metrics item without a heartbeat whose worker holds leases or reports (a worker with the key on
  writes its first heartbeat before its first report), a 3.x leader without a ``PER_WORKER`` heartbeat
  (:func:`foreign_signs`), and a worker item carrying lease
  attributes (a Java-shaped renewal: an older Java worker took an item of the lease table for a
  lease). A counter-only change of a lease is *not* a sign by itself: kcl-daemon renews a lease
  adopted from a leader once, and the owner of any lease renewed that way by a foreign worker has no
  heartbeat, which is a sign already. Falling back is for the process's life (:func:`settle`); the
  worker then takes its heartbeat off its item, deleting the item when nothing else is on it
  (:func:`heartbeat_withdrawal`), which the others see as an owner without one. A heartbeat that
  vanishes, or turns to ``PER_LEASE``, vouches no longer but counts as standing still from its last
  advance (:class:`ItemObservation`), so the leases it kept stay safe until their counters move.

``now`` is monotonic seconds, always passed in.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
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

#: Java's kind for a worker's item in a single-table lease table (contract §3.4)
WORKER_ITEM_TYPE: Final = "WORKER_METRIC_STATS"
#: the key of the worker-metrics table of the 3.0-3.4 layout (contract §3.9): where heartbeats live
WORKER_KEY: Final = "wid"
BEAT: Final = "kdhb"
MODE: Final = "kdrm"
#: attributes a Java worker-metrics item has (contract §3.9); kcl-daemon's own carries ``kdx`` too
JAVA_METRICS: Final = "lut"
KCL_DAEMON_MARK: Final = "kdx"
#: the ``lut`` a heartbeat gives an item without one: a dead "default metric" worker to Java
NO_REPORT_LUT: Final = "0"


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
    #: a worker-metrics report (``lut`` other than a heartbeat's 0), Java's or kcl-daemon's
    metrics: bool = False
    #: kcl-daemon's marks are there (``kdx`` of its metrics reporter, or a heartbeat)
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
    """Decode an item of the worker-metrics table (key ``wid``), or a ``WORKER_METRIC_STATS`` item of
    the lease table (:func:`is_worker_item` first)."""
    key = item.get(WORKER_KEY, item.get(LEASE_KEY, {})).get("S")
    if not isinstance(key, str) or not key:
        raise CorruptWorkerItem("a worker item without a string wid or leaseKey")
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
    lut = item.get(JAVA_METRICS)
    return WorkerItem(
        worker_id=key,
        beat=beat,
        mode=mode,
        metrics=lut is not None and lut.get("N") != NO_REPORT_LUT,
        kcl_daemon=KCL_DAEMON_MARK in item or BEAT in item or MODE in item,
        leased_by=owner if isinstance(owner, str) else None,
        lease_shaped=LEASE_OWNER in item or LEASE_COUNTER in item,
        metrics_seen=_plain(item.get(JAVA_METRICS)),
    )


def heartbeat_withdrawal(worker_id: str) -> HeartbeatWrite:
    """Delete ``worker_id``'s item after a fall-back when it holds nothing but a heartbeat (no metrics
    report, no lease attributes); else :func:`heartbeat_removal` takes the heartbeat off it."""
    return HeartbeatWrite(
        key={WORKER_KEY: {"S": worker_id}},
        update="",
        condition=(
            "attribute_exists(#beat) AND (attribute_not_exists(#lut) OR #lut = :none) "
            "AND attribute_not_exists(#mark) AND attribute_not_exists(#owner) "
            "AND attribute_not_exists(#counter)"
        ),
        names={
            "#beat": BEAT,
            "#lut": JAVA_METRICS,
            "#mark": KCL_DAEMON_MARK,
            "#owner": LEASE_OWNER,
            "#counter": LEASE_COUNTER,
        },
        values={":none": {"N": NO_REPORT_LUT}},
    )


def heartbeat_removal(worker_id: str) -> HeartbeatWrite:
    """Take the heartbeat off ``worker_id``'s item, which a metrics report shares."""
    return HeartbeatWrite(
        key={WORKER_KEY: {"S": worker_id}},
        update="REMOVE #beat, #mode",
        condition="attribute_exists(#beat) OR attribute_exists(#mode)",
        names={"#beat": BEAT, "#mode": MODE},
        values={},
    )


def heartbeat_items(scan: object, place: Iterable[Item] = ()) -> list[Item]:
    """The worker items to observe: the lease table's (a scan's ``workers``) and the heartbeat place's."""
    return [*getattr(scan, "workers", ()), *place]


def workers_of(
    scan: object,
    place: Iterable[Item] = (),
    *,
    on_corrupt: Callable[[CorruptWorkerItem], None] | None = None,
) -> list[WorkerItem]:
    """The readable worker items a lease-table scan carried (``workers``; none when it has no such
    field) and the heartbeat place's ``place``; corrupt ones are left out, each handed to
    ``on_corrupt`` if given (the taker's shell warns about them). A worker with an item in both: the
    one with a heartbeat counts."""
    items = []
    for raw in heartbeat_items(scan, place):
        try:
            items.append(worker_item_from(raw))
        except CorruptWorkerItem as exc:
            if on_corrupt is not None:
                on_corrupt(exc)
    return merged(items)


def merged(items: Iterable[WorkerItem]) -> list[WorkerItem]:
    """One item per worker, when a worker has items in two places: one written as a lease first (a
    sign never hides), then one with a heartbeat."""
    by_worker: dict[str, WorkerItem] = {}
    for item in items:
        seen = by_worker.get(item.worker_id)
        if seen is None or _rank(item) > _rank(seen):
            by_worker[item.worker_id] = item
    return list(by_worker.values())


def _rank(item: WorkerItem) -> tuple[bool, bool]:
    return (item.lease_shaped, item.beat is not None)


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
    """Advance ``worker_id``'s heartbeat and state its mode; ``lut`` 0 when absent; never on a lease."""
    return HeartbeatWrite(
        key={WORKER_KEY: {"S": worker_id}},
        update="ADD #beat :one SET #mode = :mode, #lut = if_not_exists(#lut, :none)",
        condition="attribute_not_exists(#owner) AND attribute_not_exists(#counter)",
        names={
            "#beat": BEAT,
            "#mode": MODE,
            "#lut": JAVA_METRICS,
            "#owner": LEASE_OWNER,
            "#counter": LEASE_COUNTER,
        },
        values={":one": {"N": "1"}, ":mode": {"S": mode.value}, ":none": {"N": NO_REPORT_LUT}},
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
    read the result unchanged). Leases of owners without a heartbeat keep their counter's time. A lease
    with a pending 3.x hand-off is vouched for by the worker serving it until the hand-off completes, its
    ``checkpointOwner``, as its renewals would keep it."""
    entries = dict(observations.entries)
    for lease in leases:
        seen = entries.get(lease.lease_key)
        serving = lease.checkpoint_owner or lease.lease_owner
        if seen is None or serving is None:
            continue
        beat_at = beats.beat_changed_at(serving)
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
    *,
    leader: str | None = None,
) -> list[str]:
    """Every sign, in the last scan, of a worker not renewing per worker (empty: none). ``leader``: the
    3.x leader as this worker saw it *before* the scan (None: none, or the 2.x taker): one that is not
    this worker and whose item shows no ``PER_WORKER`` heartbeat judges expiry by counters alone (a Java
    leader, or a kcl-daemon worker with the key off), so it is a sign even before it holds a lease."""
    signs: list[str] = []
    if leader is not None and leader != me and not _heartbeating_leader(beats.entries.get(leader)):
        signs.append(
            f"the 3.x leader {leader} does not heartbeat in PER_WORKER mode (its expiry reads lease "
            "counters only: a Java worker, or a kcl-daemon worker with the key off)"
        )
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
            elif worker_id in owners or (item.metrics and alive):
                # a live kcl-daemon report without a heartbeat, even holding nothing: a worker with the
                # key on writes its first heartbeat before its first report, and one with the key off may
                # become the 3.x leader, whose expiry reads counters it has watched stand still
                signs.append(f"worker {worker_id} writes no heartbeat (leaseRenewal is off there)")
        elif item.mode is not RenewalMode.PER_WORKER and worker_id in owners:
            signs.append(f"worker {worker_id} renews per lease ({MODE} = {item.mode})")
    for owner in sorted(owners - set(beats.items) - {me}):
        signs.append(f"lease owner {owner} has no heartbeat item (a worker not in PER_WORKER mode)")
    return signs


def _heartbeating_leader(seen: ItemObservation | None) -> bool:
    """Whether a leader's item says it judges expiry through the heartbeats: it heartbeats in
    ``PER_WORKER`` mode now, or its item vanished after it did (a leader stopping gracefully deletes its
    item before it gives the lock up, and a lock read older than the scan still names it; a kcl-daemon
    worker with the key on reads the heartbeats as leader even after a fall-back)."""
    if seen is None:
        return False
    if seen.present:
        return seen.item.heartbeats
    return seen.beat_at is not None


def decide(
    configured: RenewalMode,
    leases: Iterable[Lease],
    beats: HeartbeatObservations,
    me: str,
    now: float,
    failover_s: float,
    *,
    leader: str | None = None,
) -> ModeDecision:
    """``PER_WORKER`` only when configured and no sign says otherwise; else ``PER_LEASE``, with why."""
    if configured is RenewalMode.PER_LEASE:
        return ModeDecision(RenewalMode.PER_LEASE, "leaseRenewal is PER_LEASE")
    signs = foreign_signs(list(leases), beats, me, now, failover_s, leader=leader)
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
    at or past the one held counts, so a scan older than this worker's own take (which shows the counter
    before it) is not a loss. Another owner *at* the held counter cannot happen where conditional writes
    are atomic (each write sets ``counter + 1`` on the counter it found), but it does where two writes
    fenced on the same counter both applied (an emulator under load: our checkpoint and a steal): in
    the default mode the next renewal's condition would catch it; here only the scan can."""
    ours = seen.lease_owner == me or seen.checkpoint_owner == me
    return not ours and seen.lease_counter >= held.lease_counter
