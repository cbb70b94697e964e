"""What a running worker serves on the metrics endpoint: ``/healthz`` and ``/readyz`` (:class:`WorkerHealth`),
the status page and its history (:class:`WorkerStatus`)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.instrument import TableContact, watch_table
from kcl_daemon.clock import Clock
from kcl_daemon.metrics.prometheus import PrometheusEndpoint
from kcl_daemon.metrics.registry import DaemonMetrics
from kcl_daemon.supervise import EventLoopWatchdog
from kcl_daemon.worker.health import HealthSettings, WorkerHealth
from kcl_daemon.worker.plan import WorkerPlan
from kcl_daemon.worker.scheduler import Scheduler
from kcl_daemon.worker.status import StatusInfo, WorkerStatus


def attach_health(
    scheduler: Scheduler, plan: WorkerPlan, clients: AwsClients, endpoint: PrometheusEndpoint
) -> Callable[[], None]:
    """Answer ``/healthz`` and ``/readyz`` on ``endpoint`` for ``scheduler`` (call on the event loop);
    returns the function that stops the event-loop watchdog."""
    contact = TableContact(plan.table_name)
    watch_table(clients.dynamodb, contact)
    watchdog = EventLoopWatchdog(asyncio.get_running_loop()).start()
    endpoint.health = WorkerHealth(
        scheduler, HealthSettings(stall_limit_s=plan.shard_stall_s), contact=contact, watchdog=watchdog
    )
    return watchdog.stop


def attach_status(
    scheduler: Scheduler,
    plan: WorkerPlan,
    metrics: DaemonMetrics,
    endpoint: PrometheusEndpoint,
    clock: Clock,
) -> WorkerStatus:
    """Serve the status page (``/``, ``/status.json``) on ``endpoint`` for ``scheduler``, and start its
    history sampler (call on the event loop)."""
    mode = plan.lease_mode
    info = StatusInfo(
        worker_id=plan.worker_id,
        stream=plan.stream_name,
        table=plan.table_name,
        zone=None if mode is None else mode.metrics.zone,
        restart_grace_s=0.0 if mode is None else mode.restart_grace_s,
    )
    status = WorkerStatus(scheduler, info, metrics=metrics, health=lambda: endpoint.health)
    scheduler.add_loop("status-history", functools.partial(status.run_sampler, clock))
    endpoint.status = status
    return status
