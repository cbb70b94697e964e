"""The worker's /healthz on the emulators (kcl_daemon.worker.health, in-process): a lease keeper wedged
(its thread and its renewals) turns it red, naming the lease held past the time the keeper gives it up,
and green again once it goes on (the lease is given up, then taken again)."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.clock import SystemClock
from kcl_daemon.config.settings import Settings
from kcl_daemon.core.sequence import Sentinel
from kcl_daemon.metrics.prometheus import serve
from kcl_daemon.metrics.registry import DaemonMetrics
from kcl_daemon.run import build_scheduler, plan_worker
from kcl_daemon.worker.endpoints import attach_health
from tests.support.health import ask, failing_checks
from tests.support.paths import RECORDER

pytestmark = pytest.mark.integration


async def poll(
    base_url: str, path: str, until: Callable[[int, dict[str, Any]], bool], limit_s: float, what: str
) -> dict[str, Any]:
    """Ask from a thread (never from the event loop the worker runs on) until ``until`` holds."""
    deadline = time.monotonic() + limit_s
    while True:
        status, body = await asyncio.to_thread(ask, base_url, path)
        if until(status, body):
            return body
        assert time.monotonic() < deadline, f"{what}: not within {limit_s}s; last answer {status} {body}"
        await asyncio.sleep(0.1)


async def test_a_wedged_renewer_turns_healthz_red_and_green_again(
    aws_clients: AwsClients, make_stream: Callable[[int], str], lease_table: DynamoLeaseTable
) -> None:
    settings = Settings(
        executable=(sys.executable, str(RECORDER)),
        application_name=lease_table.table_name,
        stream_name=make_stream(1),
        initial_position=Sentinel.TRIM_HORIZON,
        failover_s=2.0,
        client_version_config="CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1",  # the taker: a lease at once
    )
    plan = plan_worker(settings, worker_id="wedged")
    scheduler = build_scheduler(plan, aws_clients, clock=SystemClock())
    endpoint = serve(DaemonMetrics(process_metrics=False), 0)
    url = endpoint.base_url
    stop_watchdog = attach_health(scheduler, plan, aws_clients, endpoint)
    wedge = threading.Event()
    wedge.set()
    keeper = scheduler.coordinator.keeper
    table = keeper._table

    class _Wedged:
        """A lease table whose renewals and takes block while ``wedge`` is clear."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def renew(self, lease: Any) -> Any:
            wedge.wait()
            return self.inner.renew(lease)

        def take(self, lease: Any, owner: str) -> Any:
            wedge.wait()
            return self.inner.take(lease, owner)

    tick, coordinator_table = keeper.tick, scheduler.coordinator._table
    try:
        await scheduler.start()
        await poll(url, "/readyz", lambda _, body: "holds 1 lease" in str(body), 20, "a lease held")
        await poll(url, "/healthz", lambda status, _: status == 200, 5, "live")
        wedge.clear()
        keeper._table = _Wedged(table)

        def wedged_tick() -> float:
            wedge.wait()  # the keeper thread itself is stuck: nothing gives the lease up
            return tick()

        keeper.tick = wedged_tick  # type: ignore[method-assign]
        scheduler.coordinator._table = _Wedged(coordinator_table)  # nor does our taker take it again
        red = await poll(url, "/healthz", lambda status, _: status == 503, 15, "healthz red")
        assert "past the time the lease keeper gives them up" in failing_checks(red)["renewer"], red
        keeper._table = table
        keeper.tick = tick  # type: ignore[method-assign]
        scheduler.coordinator._table = coordinator_table
        wedge.set()  # the renewals land again (or the lease is given up and taken again)
        await poll(url, "/healthz", lambda status, _: status == 200, 15, "healthz green again")
        await poll(url, "/readyz", lambda _, body: "holds 1 lease" in str(body), 20, "the lease again")
    finally:
        wedge.set()
        keeper._table = table
        keeper.tick = tick  # type: ignore[method-assign]
        scheduler.coordinator._table = coordinator_table
        stop_watchdog()
        await scheduler.close()
        endpoint.close()
