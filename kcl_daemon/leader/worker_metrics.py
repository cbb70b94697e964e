"""Publishes this worker's ``WorkerMetricStats`` item (contract §3.9, §5.4) so a 3.x leader assigns it leases.

Every ``capture_s`` the CPU of the daemon and its children is sampled; every ``report_s`` the samples
since the last report are averaged (-1 if none succeeded), appended to the bounded history, and the item
is upserted with ``lut`` = now (epoch seconds). With ``disableWorkerMetrics`` the item carries empty maps
(the leader then balances this worker by throughput). The first report goes out at once, so a new
worker is assignable from its first seconds. :meth:`withdraw` deletes the item on a graceful stop, so the
leader stops assigning to this worker at once (Java keeps doing so for 60 s, KCL#1452); with a restart
grace, :meth:`declare_restart` publishes the RESTARTING state instead, so its leases wait for it. Each item
carries kcl-daemon's extra attribute (zone, capacity, state; :mod:`kcl_daemon.core.leader.zones`) and
KCL 3.5's support code (``sup`` = 1, refreshed ``slu``), without which a 3.5 leader never starts the table
migration.

:meth:`align_with_fleet` is told which live workers are Java workers reporting no CPU; while there are
any, this worker reports no CPU either (logged when it changes), because a Java leader balances
CPU-reporting and non-reporting workers as two separate groups and a lone CPU reporter would get no
leases (contract §5.2).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

from kcl_daemon.clock import Clock
from kcl_daemon.core.leader.decider import WorkerState
from kcl_daemon.core.leader.table_migration import SUPPORT_CODE
from kcl_daemon.core.leader.worker_metrics import CPU, FAILED_SAMPLE, WorkerMetricStats, append_sample
from kcl_daemon.core.leader.zones import WorkerExtras, extras_to_attribute
from kcl_daemon.errors import KclError
from kcl_daemon.leader.cpu import CpuSampler

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkerMetricsConfig:
    worker_id: str
    capture_s: float = 1.0
    report_s: float = 30.0
    history: int = 10
    disabled: bool = False
    #: published in kcl-daemon's extra attribute for the assignor (core.zones)
    zone: str | None = None
    capacity: float = 1.0


class WorkerMetricsPublisher:
    def __init__(
        self,
        table: object,  # WorkerMetricsTable or a fake: publish(stats), delete(worker_id)
        config: WorkerMetricsConfig,
        clock: Clock,
        sampler: CpuSampler,
        pool: Executor,
        *,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self._table = table
        self._clock = clock
        self._sampler = sampler
        self._pool = pool
        self._wall = wall
        self._samples: list[float] = []
        self._history: tuple[float, ...] = ()
        self.last_published: WorkerMetricStats | None = None
        self._withdrawn = False
        #: set while live Java workers report no CPU: report none either (why, for the log)
        self.cpu_off_because: str | None = None

    def align_with_fleet(self, java_without_cpu: tuple[str, ...]) -> None:
        """Report CPU unless live Java workers without CPU are in the fleet (logged on each change)."""
        if self.config.disabled:
            return
        because = None
        if java_without_cpu:
            names = ", ".join(java_without_cpu[:3]) + (" ..." if len(java_without_cpu) > 3 else "")
            because = f"{len(java_without_cpu)} live Java worker(s) report no CPU ({names})"
        if (because is None) != (self.cpu_off_because is None):
            if because is not None:
                logger.warning(
                    "%s: this worker reports no CPU either, so a Java leader balances the whole fleet as "
                    "one group (set disableWorkerMetrics to make it permanent)",
                    because,
                )
            else:
                logger.info("no live Java worker without CPU any more: reporting CPU again")
        self.cpu_off_because = because

    def capture(self) -> None:
        if not self._sampler.due():
            return
        value = self._sampler.sample()
        if value is not None:
            self._samples.append(value)
            del self._samples[:-300]  # Java keeps up to 300 raw samples per metric

    def _extra(
        self, state: WorkerState = WorkerState.ACTIVE, grace_until: float | None = None
    ) -> dict[str, object]:
        extras = WorkerExtras(self.config.zone, self.config.capacity, state, grace_until)
        return extras_to_attribute(extras)

    def next_stats(self) -> WorkerMetricStats:
        """The item of the next report (consumes the captured samples)."""
        now = self._wall()
        if self.config.disabled or self.cpu_off_because is not None:
            self._samples.clear()
            return WorkerMetricStats(
                self.config.worker_id,
                now,
                extra=self._extra(),
                support_code=SUPPORT_CODE,
                support_updated_s=now,
            )
        sample = sum(self._samples) / len(self._samples) if self._samples else FAILED_SAMPLE
        self._samples.clear()
        self._history = append_sample(self._history, sample, self.config.history)
        return WorkerMetricStats(
            self.config.worker_id,
            now,
            {CPU: self._history},
            {CPU: (100.0,)},
            extra=self._extra(),
            support_code=SUPPORT_CODE,
            support_updated_s=now,
        )

    async def publish_once(self) -> None:
        if self._withdrawn:
            return
        stats = self.next_stats()
        publish = self._table.publish  # type: ignore[attr-defined]
        await asyncio.get_running_loop().run_in_executor(self._pool, publish, stats)
        self.last_published = stats

    async def run(self) -> None:
        """Capture and report until cancelled (supervised by the caller)."""
        self.capture()
        next_report = self._clock.monotonic()
        while True:
            if self._clock.monotonic() >= next_report:
                try:
                    await self.publish_once()
                except KclError as exc:
                    logger.warning("publishing worker metrics failed, will retry: %s", exc)
                next_report = self._clock.monotonic() + self.config.report_s
            await self._clock.sleep(min(self.config.capture_s, max(next_report - self._clock.monotonic(), 0)))
            self.capture()

    async def declare_restart(self, grace_s: float) -> bool:
        """Graceful stop with a restart grace: publish RESTARTING until ``now + grace_s``, report no more.

        The leader keeps this worker's leases for it until then (core.assignor). Returns False if the
        item could not be written (the caller then withdraws instead)."""
        self._withdrawn = True
        now = self._wall()
        last = self.last_published
        stats = WorkerMetricStats(
            self.config.worker_id,
            now,
            last.stats if last is not None else {},
            last.operating_range if last is not None else {},
            extra=self._extra(WorkerState.RESTARTING, now + grace_s),
            support_code=SUPPORT_CODE,
            support_updated_s=now,
        )
        publish = self._table.publish  # type: ignore[attr-defined]
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, publish, stats)
        except KclError as exc:
            logger.warning("declaring the restart grace of %s failed: %s", self.config.worker_id, exc)
            return False
        logger.info("worker %s restarting: its leases wait for it %.1fs", self.config.worker_id, grace_s)
        return True

    async def withdraw(self) -> None:
        """Delete this worker's item (graceful stop); no more reports after this."""
        self._withdrawn = True
        delete = self._table.delete  # type: ignore[attr-defined]
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, delete, self.config.worker_id)
        except KclError as exc:
            logger.warning("deleting worker metrics of %s failed: %s", self.config.worker_id, exc)
        else:
            logger.info("worker metrics of %s deleted", self.config.worker_id)
