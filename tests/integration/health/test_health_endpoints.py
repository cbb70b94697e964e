"""/healthz and /readyz on the emulators, red for the reason they exist and green again after recovery:
a wedged renewer (in-process, the renewal coroutine held), a stalled shard (a daemon whose processor
holds its batch) and a lost lease table (a daemon whose DynamoDB stops answering, through the fault
proxy)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.clock import SystemClock
from kcl_daemon.config.settings import Settings
from kcl_daemon.core.sequence import Sentinel
from kcl_daemon.metrics.prometheus import serve
from kcl_daemon.metrics.registry import DaemonMetrics
from kcl_daemon.run import attach_health, build_scheduler, plan_worker
from tests.support.daemons import Daemon, failing_checks, start_daemon, wait_for
from tests.support.emulators import Backend
from tests.support.fault_proxy import Fault, FaultProxy, rule
from tests.support.paths import RECORDER
from tests.support.streams import put

pytestmark = pytest.mark.integration

PHASE1 = "CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1"  # the 2.x taker: leases at once


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a local test server
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def poll(
    url: str, until: Callable[[int, dict[str, Any]], bool], limit_s: float, what: str
) -> dict[str, Any]:
    """Ask ``url`` from a thread (never from the event loop the daemon runs on) until ``until`` holds."""
    deadline = time.monotonic() + limit_s
    while True:
        status, body = await asyncio.to_thread(get, url)
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
        client_version_config=PHASE1,
    )
    plan = plan_worker(settings, worker_id="wedged")
    scheduler = build_scheduler(plan, aws_clients, clock=SystemClock())
    endpoint = serve(DaemonMetrics(process_metrics=False), 0)
    stop_watchdog = attach_health(scheduler, plan, aws_clients, endpoint)
    wedge = asyncio.Event()
    renew = scheduler.coordinator._renew

    async def wedged_renew(key: str) -> None:
        await wedge.wait()  # a renewal that never returns: what a stuck renewer looks like from outside
        await renew(key)

    try:
        await scheduler.start()
        await poll(f"{endpoint.base_url}/readyz", lambda s, _: s == 200, 20, "ready")
        await poll(f"{endpoint.base_url}/healthz", lambda s, _: s == 200, 5, "live")
        await poll(f"{endpoint.base_url}/readyz", lambda _, body: "holds 1 lease" in str(body), 20, "a lease")
        scheduler.coordinator._renew = wedged_renew  # type: ignore[method-assign]
        red = await poll(f"{endpoint.base_url}/healthz", lambda s, _: s == 503, 15, "healthz red")
        assert "renewer" in {c["name"] for c in red["checks"] if not c["ok"]}, red
        assert "still held past their local expiry" in str(red)
        scheduler.coordinator._renew = renew  # type: ignore[method-assign]
        wedge.set()  # the held renewals go on: they give the lease up, the taker takes it again
        await poll(f"{endpoint.base_url}/healthz", lambda s, _: s == 200, 15, "healthz green again")
        await poll(f"{endpoint.base_url}/readyz", lambda s, _: s == 200, 15, "ready again")
    finally:
        wedge.set()
        stop_watchdog()
        await scheduler.close()
        endpoint.close()


@pytest.fixture
def application(lease_table: DynamoLeaseTable) -> str:
    """The daemon's applicationName: the fixture's fresh table (deleted after the test)."""
    return lease_table.table_name


def test_a_stalled_shard_turns_readyz_red_and_green_again(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    make_stream: Callable[[int], str],
    application: str,
) -> None:
    stream = make_stream(1)
    pause = tmp_path / "pause"
    daemon = start_daemon(
        tmp_path,
        backend,
        application=application,
        stream=stream,
        worker="stalls",
        metrics=True,
        extra={"shardStallMillis": 1500, "clientVersionConfig": PHASE1},
        env={"KCL_TEST_PAUSE_FILE": str(pause)},
    )
    try:
        wait_for(lambda: daemon.health("/readyz")[0] == 200, 30, "ready", daemon)
        pause.touch()
        put(aws_clients, stream, range(20))
        wait_for(
            lambda: "shards" in failing_checks(daemon.health("/readyz")[1]), 20, "a stalled shard", daemon
        )
        status, body = daemon.health("/readyz")
        assert status == 503 and "behind, nothing processed" in failing_checks(body)["shards"], body
        assert daemon.health("/healthz")[0] == 200  # stalled is not dead: nothing to restart
        pause.unlink()
        wait_for(lambda: daemon.health("/readyz")[0] == 200, 20, "ready again", daemon)
        assert daemon.stop() == 0
    finally:
        daemon.kill()


@pytest.fixture
def proxy(backend: Backend) -> Iterator[FaultProxy]:
    with FaultProxy(backend.dynamodb_endpoint, seed=3) as started:
        yield started


def test_a_lost_lease_table_turns_readyz_red_and_green_again(
    tmp_path: Path,
    backend: Backend,
    make_stream: Callable[[int], str],
    application: str,
    proxy: FaultProxy,
) -> None:
    daemon: Daemon = start_daemon(
        tmp_path,
        backend,
        application=application,
        stream=make_stream(1),
        worker="cut-off",
        metrics=True,
        dynamodb_endpoint=proxy.endpoint,
        extra={"clientVersionConfig": PHASE1},
    )
    try:
        wait_for(lambda: daemon.health("/readyz")[0] == 200, 30, "ready", daemon)
        proxy.set_rules(rule(Fault.DROP))  # every DynamoDB call: the connection closes, no answer
        wait_for(
            lambda: "lease-table" in failing_checks(daemon.health("/readyz")[1]), 20, "table lost", daemon
        )
        detail = failing_checks(daemon.health("/readyz")[1])["lease-table"]
        assert f"{application} has failed every call" in detail, detail
        assert daemon.health("/healthz")[0] == 200  # unreachable is not wedged: a restart would not help
        proxy.clear()
        wait_for(lambda: daemon.health("/readyz")[0] == 200, 30, "ready again", daemon)
        assert daemon.stop() == 0
    finally:
        daemon.kill()
