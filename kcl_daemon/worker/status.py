"""The worker's status page data: a :class:`~kcl_daemon.core.worker.status.StatusSnapshot` of one :class:`Scheduler`.

Built only when someone asks (``/`` or ``/status.json``), on the metrics server's own thread, never on
the event loop, like the health answers (:mod:`kcl_daemon.worker.health`): it reads plain attributes the
loop writes (the held leases, each shard's task and consumer, the lease mode's last lock check, the
metrics registry's last lease-table scan) and copies every collection before reading it. Nothing is read
from AWS for it: the fleet is the taker's (2.x) or the leader's (3.x) last scan.

One small thing runs when nobody looks: :meth:`StatusHistory.sample`, every :data:`SAMPLE_EVERY_S` on the
event loop, appends each held shard's ``millisBehindLatest`` and record count and the leases per worker
of the last scan to ring buffers of :data:`HISTORY_SAMPLES` entries (the sparklines, and the records/s).
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from kcl_daemon.clock import Clock
from kcl_daemon.core.worker.health import Check, HealthReport
from kcl_daemon.core.worker.status import (
    LISTED_LEASES,
    FleetView,
    FleetWorker,
    ShardView,
    StatusSnapshot,
    WorkerView,
    cut_line,
    records_rate,
)
from kcl_daemon.metrics.prometheus import HealthSource
from kcl_daemon.metrics.registry import DaemonMetrics
from kcl_daemon.worker.scheduler import Scheduler

T = TypeVar("T")

#: how far apart the history samples are, and how many are kept (5 s x 60: the last five minutes)
SAMPLE_EVERY_S = 5.0
HISTORY_SAMPLES = 60
#: how often the page reloads itself
REFRESH_S = 5

_NOT_ASKED = HealthReport((Check("health", False, "the health checks are not attached"),))


@dataclass(frozen=True, slots=True)
class StatusInfo:
    """What the page says about the worker that does not change while it runs."""

    worker_id: str
    stream: str
    table: str
    zone: str | None = None
    #: restartGraceMillis in seconds (0: off)
    restart_grace_s: float = 0.0


class StatusHistory:
    """A few minutes of each held shard's lag and record count, and of the leases per worker.

    Written by :meth:`sample` on the event loop, read by the page's thread: a lock guards the buffers.
    """

    def __init__(self, size: int = HISTORY_SAMPLES) -> None:
        self.size = size
        self._lock = threading.Lock()
        #: lease key -> (monotonic time, millisBehindLatest, records delivered by its consumer)
        self._shards: dict[str, collections.deque[tuple[float, int | None, int]]] = {}
        #: (monotonic time, leases per worker of the last scan; None: no scan yet)
        self._fleet: collections.deque[tuple[float, Mapping[str, int] | None]] = collections.deque(
            maxlen=size
        )

    def record(
        self, now: float, shards: Mapping[str, tuple[int | None, int]], per_worker: Mapping[str, int] | None
    ) -> None:
        with self._lock:
            for gone in [key for key in self._shards if key not in shards]:
                del self._shards[gone]
            for key, (lag, count) in shards.items():
                buffer = self._shards.get(key)
                if buffer is None:
                    buffer = self._shards[key] = collections.deque(maxlen=self.size)
                buffer.append((now, lag, count))
            self._fleet.append((now, per_worker))

    def shard(self, key: str) -> list[tuple[float, int | None, int]]:
        with self._lock:
            return list(self._shards.get(key, ()))

    def fleet(self) -> list[tuple[float, Mapping[str, int] | None]]:
        with self._lock:
            return list(self._fleet)


class WorkerStatus:
    """The status page of one worker (satisfies ``metrics.prometheus.StatusSource``)."""

    def __init__(
        self,
        scheduler: Scheduler,
        info: StatusInfo,
        *,
        metrics: DaemonMetrics | None = None,
        health: Callable[[], HealthSource | None] = lambda: None,
        history: StatusHistory | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._scheduler = scheduler
        self._info = info
        self._metrics = metrics
        self._health = health
        self.history = history or StatusHistory()
        self._monotonic = monotonic
        self._wall = wall
        self._started = monotonic()

    # -- the sampler (event loop) ----------------------------------------------------------------

    def sample(self) -> None:
        """One history sample (cheap: a few attribute reads per held shard)."""
        shards: dict[str, tuple[int | None, int]] = {}
        for key, task in self._scheduler.tasks.items():
            consumer = task.consumer
            if consumer is not None:
                shards[key] = (consumer.millis_behind_latest, consumer.stats.records_delivered)
        scan = None if self._metrics is None else self._metrics.last_scan
        self.history.record(self._monotonic(), shards, None if scan is None else scan.figures.per_worker)

    async def run_sampler(self, clock: Clock) -> None:
        """Sample every :data:`SAMPLE_EVERY_S` (a supervised loop of the worker)."""
        while True:
            self.sample()
            await clock.sleep(SAMPLE_EVERY_S)

    # -- the snapshot (the server's thread) ------------------------------------------------------

    def snapshot(self) -> StatusSnapshot:
        return _retrying(self._snapshot)

    def _snapshot(self) -> StatusSnapshot:
        now = self._monotonic()
        return StatusSnapshot(
            worker=self._worker(now),
            shards=self._shards(now),
            fleet=self._fleet(now),
            generated_at=self._wall(),
            refresh_s=REFRESH_S,
            sample_every_s=SAMPLE_EVERY_S,
        )

    def _worker(self, now: float) -> WorkerView:
        scheduler, info = self._scheduler, self._info
        source = self._health()
        liveness = _NOT_ASKED if source is None else _asked(source.liveness)
        readiness = _NOT_ASKED if source is None else _asked(source.readiness)
        mode_name, leader, leader_id = _lease_mode(scheduler.lease_mode, info.worker_id)
        return WorkerView(
            worker_id=info.worker_id,
            zone=info.zone,
            lease_mode=mode_name,
            leader=leader,
            leader_id=leader_id,
            phase=str(scheduler.phase),
            uptime_s=now - self._started,
            pid=os.getpid(),
            liveness=liveness,
            readiness=readiness,
            stream=info.stream,
            table=info.table,
            restart_grace_s=info.restart_grace_s,
            keeping_leases=scheduler.keep_leases_until is not None,
        )

    def _shards(self, now: float) -> tuple[ShardView, ...]:
        scheduler = self._scheduler
        me = self._info.worker_id
        held = dict(scheduler.coordinator.held)
        tasks = dict(scheduler.tasks)
        parked = dict(scheduler.parked)
        handing_off = scheduler.handing_off
        views = []
        for key in sorted(set(held) | set(tasks) | set(parked)):
            task = tasks.get(key)
            consumer = None if task is None else task.consumer
            held_lease = held.get(key)
            lease = held_lease.lease if held_lease is not None else (task.lease if task else None)
            shard_id = lease.shard_id if lease is not None else key
            samples = self.history.shard(key)
            notes = []
            if held_lease is None:
                notes.append("lease no longer held: the shard is stopping")
            if lease is not None and lease.checkpoint_owner == me and lease.lease_owner not in (None, me):
                notes.append(f"handing off to {lease.lease_owner}")
            elif key in handing_off:
                notes.append("handing off")
            if key in parked:
                notes.append(f"parked: {parked[key][0]}")
            if task is not None and task.waiting_on:
                notes.append("waiting on parent " + ", ".join(task.waiting_on))
            if consumer is None:
                state = "parked" if key in parked else ("waiting-on-parents" if task else "starting")
                checkpoint = None if lease is None else str(lease.checkpoint)
                views.append(
                    ShardView(
                        key, shard_id, state, checkpoint=checkpoint, note="; ".join(notes) or None,
                        lag_history=_padded([lag for _t, lag, _c in samples], self.history.size),
                    )
                )  # fmt: skip
                continue
            if consumer.stalled is not None:
                notes.append(f"child busy with {consumer.stalled} longer than childStallWarningMillis")
            lag = consumer.millis_behind_latest
            count = consumer.stats.records_delivered
            lags = [sample_lag for _t, sample_lag, _c in samples] + [lag]
            checkpointed_at = consumer.checkpointed_at
            views.append(
                ShardView(
                    lease_key=key,
                    shard_id=shard_id,
                    state=str(consumer.state),
                    millis_behind_latest=lag,
                    records_per_s=records_rate(count, now, [(t, c) for t, _lag, c in samples]),
                    records_delivered=count,
                    checkpoint=str(consumer.checkpoint),
                    checkpoint_age_s=None if checkpointed_at is None else max(now - checkpointed_at, 0.0),
                    child_pid=consumer.child_pid,
                    child_restarts=max(consumer.stats.child_starts - 1, 0),
                    last_stderr=cut_line(consumer.last_stderr_line),
                    note="; ".join(notes) or None,
                    lag_history=_padded(lags, self.history.size + 1),
                )
            )
        return tuple(views)

    def _fleet(self, now: float) -> FleetView:
        metrics = self._metrics
        scan = None if metrics is None else metrics.last_scan
        if scan is None or metrics is None:
            return FleetView(scanned_age_s=None)
        figures = scan.figures
        leases = list(scan.leases)
        expired = [
            (lease.lease_key, lease.lease_owner)
            for lease in leases
            if lease.lease_owner is not None and lease.lease_key in scan.expired_keys
        ]
        unowned = [
            lease.lease_key for lease in leases if lease.lease_owner is None and not lease.is_shard_end
        ]
        history = self.history.fleet()
        workers = tuple(
            FleetWorker(
                worker,
                metrics.zone_of(worker),
                count,
                _padded(
                    [None if seen is None else seen.get(worker) for _t, seen in history], self.history.size
                ),
            )
            for worker, count in figures.per_worker.items()
        )
        return FleetView(
            scanned_age_s=max(now - scan.at, 0.0),
            total_leases=figures.total_leases,
            total_shards=figures.total_shards,
            finished=figures.finished,
            workers=workers,
            zones=tuple(figures.per_zone.items()),
            expired=tuple(expired[:LISTED_LEASES]),
            unowned=tuple(unowned[:LISTED_LEASES]),
            expired_count=len(expired),
            unowned_count=len(unowned),
        )


def _lease_mode(mode: Any, worker_id: str) -> tuple[str, bool | None, str | None]:
    """(the lease mode as the page names it, leading?, the leader seen) from the scheduler's lease mode."""
    if mode is None:
        return "2.x taker", None, None
    algorithm = getattr(mode, "algorithm", None)
    version = getattr(mode, "version", None)
    name = getattr(algorithm, "value", "starting")
    if version is not None:
        name += f" ({getattr(version, 'value', version)})"
    if getattr(algorithm, "name", None) != "LEADER":
        return name, None, None
    seen = getattr(getattr(mode, "election", None), "leader_seen", None)
    return name, seen == worker_id, seen


def _padded(values: list[int | None], size: int) -> tuple[int | None, ...]:
    """The last ``size`` values, None in front: every sparkline spans the same minutes."""
    kept = values[-size:]
    return (None,) * (size - len(kept)) + tuple(kept)


def _asked(read: Callable[[], HealthReport]) -> HealthReport:
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - the page shows what the probe would have said
        return HealthReport((Check("health-check", False, f"the check itself failed: {exc!r}"),))


def _retrying(read: Callable[[], T]) -> T:
    """The event loop may change a dict while this thread copies it; read again then."""
    for _ in range(5):
        try:
            return read()
        except RuntimeError:  # "dictionary changed size during iteration"
            continue
    return read()
