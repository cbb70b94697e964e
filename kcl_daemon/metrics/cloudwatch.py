"""The CloudWatch exporter: every ``metricsBufferTimeMillis``, queue the registry's data points and publish
them with PutMetricData on its own thread, so the daemon never waits for CloudWatch.

The queue holds at most ``metricsMaxQueueSize`` data points; beyond that new ones are dropped and
counted (``kcl_metrics_dropped_total``). A failed PutMetricData drops its batch, is counted
(``kcl_cloudwatch_put_failures_total``) and is logged once per interval, not once per call.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from kcl_daemon.aws.cloudwatch import Datum
from kcl_daemon.clock import Clock
from kcl_daemon.errors import KclError
from kcl_daemon.metrics.cloudwatch_data import CloudWatchPlan, SeriesKey, datums_from
from kcl_daemon.metrics.registry import DaemonMetrics

logger = logging.getLogger(__name__)

#: Publishes one batch (blocking); ``kcl_daemon.aws.cloudwatch.CloudWatchPublisher.put``.
Put = Callable[[str, Sequence[Datum]], int]


class CloudWatchExporter:
    def __init__(
        self,
        metrics: DaemonMetrics,
        plan: CloudWatchPlan,
        put: Put,
        clock: Clock,
        *,
        buffer_s: float = 10.0,
        max_queue: int = 10000,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._metrics = metrics
        self._plan = plan
        self._put = put
        self._clock = clock
        self.buffer_s = buffer_s
        self._queue: collections.deque[Datum] = collections.deque()
        self._max_queue = max_queue
        self._now = now
        self._previous: dict[SeriesKey, tuple[float, float]] = {}
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="cloudwatch-put")
        self._in_flight: asyncio.Future[int] | None = None
        self._failures_since_log = 0
        self._last_failure: str = ""
        self.published = 0

    def collect(self) -> int:
        """Queue the data points of now; returns how many were queued (the rest were dropped)."""
        datums, self._previous = datums_from(
            self._metrics.snapshot(), self._previous, self._plan, self._now()
        )
        room = max(self._max_queue - len(self._queue), 0)
        self._queue.extend(datums[:room])
        if len(datums) > room:
            self._metrics.counter("kcl_metrics_dropped").inc(len(datums) - room)
        return min(room, len(datums))

    async def flush(self) -> None:
        """Publish what is queued (waits for the put; the loop itself never does)."""
        if self._in_flight is not None and not self._in_flight.done():
            return  # the previous put is still running: keep queueing
        batch = list(self._queue)
        self._queue.clear()
        if not batch:
            return
        loop = asyncio.get_running_loop()
        self._in_flight = loop.run_in_executor(self._pool, self._put_counted, batch)
        await asyncio.shield(self._in_flight)

    def _put_counted(self, batch: list[Datum]) -> int:
        try:
            calls = self._put(self._plan.namespace, batch)
        except KclError as exc:
            self._metrics.counter("kcl_cloudwatch_put_failures").inc()
            self._metrics.counter("kcl_metrics_dropped").inc(len(batch))
            self._failures_since_log += 1
            self._last_failure = str(exc)
            return 0
        self.published += len(batch)
        return calls

    def _log_failures(self) -> None:
        if self._failures_since_log:
            logger.warning(
                "CloudWatch: %d PutMetricData call(s) failed in the last %.0fs, their data points were "
                "dropped; last error: %s",
                self._failures_since_log,
                self.buffer_s,
                self._last_failure,
            )
            self._failures_since_log = 0

    async def run(self) -> None:
        """Collect and publish every ``buffer_s`` until cancelled; then publish once more."""
        try:
            while True:
                await self._clock.sleep(self.buffer_s)
                self.collect()
                self._log_failures()
                task = asyncio.ensure_future(self.flush())  # never awaited here: the loop goes on
                task.add_done_callback(_log_unexpected)
        finally:
            self.collect()
            try:
                async with asyncio.timeout(5.0):
                    await self.flush()
            except TimeoutError:
                logger.warning("CloudWatch: the last metrics were not published within 5s")
            self._log_failures()
            self._pool.shutdown(wait=False)


def _log_unexpected(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("CloudWatch: publishing failed unexpectedly", exc_info=task.exception())
