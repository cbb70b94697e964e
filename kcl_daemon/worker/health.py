"""The worker's answers to ``/healthz`` and ``/readyz``: gathers the facts, :mod:`kcl_daemon.core.worker.health`
judges them.

Called on the health endpoint's own thread (:mod:`kcl_daemon.metrics.prometheus`), never on the event
loop, so it still answers while the loop is blocked: it only reads plain attributes the loop writes
(the loop board, the held leases, each shard consumer's progress, the lease table's
:class:`~kcl_daemon.aws.instrument.TableContact`) and copies every collection before reading it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from kcl_daemon.aws.instrument import TableContact
from kcl_daemon.core.worker.health import (
    HealthReport,
    LivenessFacts,
    Phase,
    ReadinessFacts,
    ShardFacts,
    liveness,
    readiness,
)
from kcl_daemon.supervise import EventLoopWatchdog
from kcl_daemon.worker.scheduler import Scheduler

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class HealthSettings:
    #: ``shardStallMillis`` in seconds (0: off)
    stall_limit_s: float = 300.0
    #: how long the event loop may fail to run a callback; default: the renewal interval
    event_loop_limit_s: float | None = None


class WorkerHealth:
    """Liveness and readiness of one :class:`Scheduler` (satisfies ``metrics.prometheus.HealthSource``)."""

    def __init__(
        self,
        scheduler: Scheduler,
        settings: HealthSettings,
        *,
        contact: TableContact | None = None,
        watchdog: EventLoopWatchdog | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._scheduler = scheduler
        self._settings = settings
        self._contact = contact
        self._watchdog = watchdog
        self._monotonic = monotonic
        self._wall = wall

    @property
    def _failover_s(self) -> float:
        return self._scheduler.config.coordinator.failover_s

    def liveness(self) -> HealthReport:
        return liveness(_retrying(self.liveness_facts))

    def readiness(self) -> HealthReport:
        return readiness(_retrying(self.readiness_facts))

    def liveness_facts(self) -> LivenessFacts:
        scheduler = self._scheduler
        now = self._monotonic()
        renew_interval = scheduler.config.coordinator.renew_interval_s
        keeper = scheduler.coordinator.keeper
        overdue = []
        for key, held in list(scheduler.coordinator.held.items()):
            # past its local expiry the keeper keeps a lease (records held back) for up to one more
            # failover while writes go on; held past that, the keeper is stuck
            give_up = keeper.give_up_at(key)
            if give_up is None:  # given up, and the event loop has not heard yet
                give_up = held.deadline + self._failover_s
            if now > give_up:
                overdue.append((key, now - give_up))
        limit = self._settings.event_loop_limit_s or max(renew_interval, 1.0)
        return LivenessFacts(
            event_loop_lag_s=0.0 if self._watchdog is None else self._watchdog.lag_s,
            event_loop_limit_s=limit,
            loops=scheduler.loop_board.facts(now),
            overdue_leases=tuple(overdue),
            renew_grace_s=max(renew_interval, 1.0),
            started=scheduler.phase is not Phase.STARTING,
        )

    def readiness_facts(self) -> ReadinessFacts:
        scheduler = self._scheduler
        now = self._monotonic()
        shards = []
        for key, task in list(scheduler.tasks.items()):
            consumer = task.consumer
            if consumer is None:
                continue
            shards.append(ShardFacts(key, consumer.behind, max(now - consumer.progress_at, 0.0)))
        for key, (why, _wake) in list(scheduler.parked.items()):
            shards.append(ShardFacts(key, True, 0.0, parked=why))
        contact = self._contact
        leader_mode, metrics_age, metrics_limit = self._worker_metrics()
        return ReadinessFacts(
            phase=scheduler.phase,
            table=scheduler.table_name,
            table_failing_for_s=None if contact is None else contact.failing_for(now),
            table_error=None if contact is None else contact.last_error,
            table_grace_s=max(scheduler.config.coordinator.renew_interval_s, 1.0),
            held=len(scheduler.coordinator.held),
            leader_mode=leader_mode,
            metrics_age_s=metrics_age,
            metrics_limit_s=metrics_limit,
            shards=tuple(shards),
            stall_limit_s=self._settings.stall_limit_s,
        )

    def _worker_metrics(self) -> tuple[bool, float | None, float]:
        """(KCL 3.x leader mode?, seconds since our worker-metrics item was written, the limit)."""
        mode = self._scheduler.lease_mode
        algorithm = getattr(mode, "algorithm", None)
        if mode is None or getattr(algorithm, "name", None) != "LEADER":
            return False, None, 0.0
        publisher = getattr(mode, "publisher", None)
        report_s = float(getattr(getattr(publisher, "config", None), "report_s", 30.0))
        published = getattr(publisher, "last_published", None)
        lut = getattr(published, "last_update_s", None)
        age = None if lut is None else max(self._wall() - float(lut), 0.0)
        return True, age, 2 * report_s + self._failover_s


def _retrying(read: Callable[[], T]) -> T:
    """The event loop may change a dict while this thread copies it; read again then."""
    for _ in range(5):
        try:
            return read()
        except RuntimeError:  # "dictionary changed size during iteration"
            continue
    return read()
