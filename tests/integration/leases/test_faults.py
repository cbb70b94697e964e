"""The lease table and the worker behind a fault-injecting proxy, on dynalite and moto_server.

The proxy (tests/support/fault_proxy.py) answers chosen DynamoDB calls with a throttle, a 500 or a dropped
connection, before forwarding them or *after* the emulator applied them. Writes whose reply is lost must
be reconciled, start-up must ride out transient errors, and a lease table deleted while the worker runs
must stop it with exit code 1.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from random import Random

import pytest

from kcl_daemon.aws.clients import AwsClients, ClientSettings, build_clients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.clock import SystemClock
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.errors import ExitStatus
from kcl_daemon.leases.coordinator import CoordinatorConfig, LeaseCoordinator
from kcl_daemon.run import plan_worker, run_worker
from tests.support.emulators import REGION, Backend
from tests.support.fault_proxy import Fault, FaultProxy, Phase, rule
from tests.support.recorder import read_records
from tests.support.streams import put
from tests.support.worker import settings_for, wait_until

pytestmark = pytest.mark.integration

KEY = "shardId-000000000000"


@pytest.fixture
def proxy(backend: Backend) -> Iterator[FaultProxy]:
    with FaultProxy(backend.dynamodb_endpoint, seed=7) as started:
        yield started


def clients_through(proxy: FaultProxy, backend: Backend) -> AwsClients:
    return build_clients(
        ClientSettings(
            region=REGION,
            kinesis_endpoint=backend.kinesis_endpoint,
            dynamodb_endpoint=proxy.endpoint,
            connect_timeout_s=1.0,
            read_timeout_s=2.0,
        )
    )


@pytest.fixture
def faulty_table(proxy: FaultProxy, backend: Backend) -> Iterator[DynamoLeaseTable]:
    clients = clients_through(proxy, backend)
    table = DynamoLeaseTable(clients.dynamodb, f"leases-{uuid.uuid4().hex[:12]}")
    assert table.create_table_if_missing(wait_s=10, poll_s=0.02)
    table.create_lease(Lease(KEY, TRIM_HORIZON))
    yield table
    proxy.clear()
    clients.dynamodb.delete_table(TableName=table.table_name)


def coordinator_on(table: DynamoLeaseTable) -> tuple[LeaseCoordinator, list[str]]:
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), SystemClock(), rng=Random(1))
    lost: list[str] = []
    coordinator.listeners.lost.append(lost.append)
    return coordinator, lost


@pytest.mark.parametrize(("fault", "phase"), [(Fault.ERROR_500, Phase.AFTER), (Fault.DROP, Phase.AFTER)])
async def test_writes_applied_before_their_reply_was_lost_keep_the_lease(
    faulty_table: DynamoLeaseTable, proxy: FaultProxy, fault: Fault, phase: Phase
) -> None:
    coordinator, lost = coordinator_on(faulty_table)
    proxy.set_rules(rule(fault, phase=phase, ops={"UpdateItem"}, limit=1))
    await coordinator.take_once()
    assert KEY in coordinator.held, "a take applied before its reply was lost is ours"
    for n in range(1, 4):
        proxy.set_rules(rule(fault, phase=phase, ops={"UpdateItem"}, limit=1))
        written = await coordinator.checkpoint(KEY, ExtendedSequenceNumber(str(n)))
        assert written.checkpoint == ExtendedSequenceNumber(str(n))
        proxy.set_rules(rule(fault, phase=phase, ops={"UpdateItem"}, limit=1))
        await coordinator.renew_once()
    assert KEY in coordinator.held and not lost
    stored = faulty_table.get_lease(KEY, consistent=True)
    assert stored is not None and stored.lease_owner == "me"
    assert stored.checkpoint == ExtendedSequenceNumber("3") and stored == coordinator.held_lease(KEY)
    proxy.set_rules(rule(fault, phase=phase, ops={"UpdateItem"}, limit=1))
    assert await coordinator.release(KEY)
    released = faulty_table.get_lease(KEY, consistent=True)
    assert released is not None and released.lease_owner is None
    assert proxy.total_injected() == 8


@pytest.mark.parametrize(("fault", "phase"), [(Fault.ERROR_500, Phase.AFTER), (Fault.DROP, Phase.AFTER)])
async def test_a_steal_applied_before_its_reply_was_lost_is_ours(
    faulty_table: DynamoLeaseTable, proxy: FaultProxy, fault: Fault, phase: Phase
) -> None:
    faulty_table.create_lease(Lease("shardId-000000000001", TRIM_HORIZON))
    victim = LeaseCoordinator(
        faulty_table, CoordinatorConfig(worker_id="victim"), SystemClock(), rng=Random(1)
    )
    await victim.take_once()
    assert len(victim.held) == 2
    thief, lost = coordinator_on(faulty_table)
    proxy.set_rules(rule(fault, phase=phase, ops={"UpdateItem"}, limit=1))
    plan = await thief.take_once()
    assert [take.kind.value for take in plan.all] == ["steal"]
    [stolen] = thief.held
    stored = faulty_table.get_lease(stolen, consistent=True)
    assert stored is not None and stored.lease_owner == "me" and stored == thief.held_lease(stolen)
    await thief.renew_once()
    assert stolen in thief.held and not lost and proxy.total_injected() == 1
    await victim.renew_once()
    assert set(victim.held) == {KEY, "shardId-000000000001"} - {stolen}


async def test_latency_below_the_lease_time_is_harmless_and_above_it_stops_deliveries_on_our_clock(
    faulty_table: DynamoLeaseTable, proxy: FaultProxy
) -> None:
    failover = 1.5
    faulty_table.create_lease(Lease("shardId-000000000001", TRIM_HORIZON))
    coordinator = LeaseCoordinator(
        faulty_table, CoordinatorConfig(worker_id="me", failover_s=failover), SystemClock(), rng=Random(1)
    )
    lost_at: dict[str, float] = {}
    coordinator.listeners.lost.append(lambda key: lost_at.setdefault(key, time.monotonic()))
    await coordinator.take_once()
    keys = set(coordinator.held)
    assert len(keys) == 2
    renewer = asyncio.create_task(coordinator.run_renewer())
    stopped_at: dict[str, float] = {}
    try:
        proxy.set_rules(rule(Fault.LATENCY, latency_s=0.2))  # every call, well inside the renewal deadline
        await asyncio.sleep(2 * failover)
        assert len(coordinator.held) == 2 and not lost_at, "a slow but timely table loses nothing"
        assert all(coordinator.may_deliver(key, 0.0) for key in keys)
        counters = {key: coordinator.held[key].lease.lease_counter for key in coordinator.held}
        proxy.set_rules(rule(Fault.LATENCY, latency_s=10.0))  # every call hangs past the lease time
        slowed_at = time.monotonic()
        while len(lost_at) < 2 and time.monotonic() - slowed_at < 3 * failover:
            for key in keys:
                if not coordinator.may_deliver(key, 0.0):
                    stopped_at.setdefault(key, time.monotonic())
            await asyncio.sleep(0.05)
    finally:
        proxy.clear()
        renewer.cancel()
        await asyncio.gather(renewer, return_exceptions=True)
    assert min(counters.values()) >= 3, f"renewed through the slow phase: {counters}"
    # the last renewal that got through was sent before the slow phase began, so another worker may
    # take the lease failover after that at the earliest: deliveries stop by then (+ CI slack) ...
    assert set(stopped_at) == keys
    latest = max(stopped_at.values()) - slowed_at
    assert latest <= failover + 0.5, f"deliveries went on {latest:.2f}s into the slow phase"
    # ... and with no answer at all, the leases are given up one failover later
    assert set(lost_at) == keys
    assert max(lost_at.values()) - slowed_at <= 2 * failover + 0.5


async def test_throttles_and_500s_before_the_write_are_retried_within_the_lease_time(
    faulty_table: DynamoLeaseTable, proxy: FaultProxy
) -> None:
    coordinator, lost = coordinator_on(faulty_table)
    await coordinator.take_once()
    proxy.set_rules(
        rule(Fault.THROTTLE, ops={"UpdateItem"}, limit=2), rule(Fault.ERROR_500, ops={"UpdateItem"}, limit=2)
    )
    await coordinator.checkpoint(KEY, ExtendedSequenceNumber("5"))
    await coordinator.renew_once()
    assert KEY in coordinator.held and not lost and proxy.total_injected() == 4
    # a throttle was rejected unapplied and a 500 is settled by the next attempt (fenced on the same
    # counter, it applies once at most): no read needed, none made
    assert proxy.calls["GetItem"] == 0


def test_start_up_rides_out_transient_errors_on_describe_and_create_table(
    proxy: FaultProxy, backend: Backend
) -> None:
    clients = clients_through(proxy, backend)
    table = DynamoLeaseTable(clients.dynamodb, f"leases-{uuid.uuid4().hex[:12]}")
    proxy.set_rules(
        rule(Fault.ERROR_500, ops={"DescribeTable"}, limit=2),
        rule(Fault.THROTTLE, ops={"CreateTable"}, limit=1),
        rule(Fault.DROP, phase=Phase.AFTER, ops={"CreateTable"}, limit=1),
    )
    try:
        table.create_table_if_missing(wait_s=10, poll_s=0.05)
        assert proxy.total_injected() == 4
        proxy.clear()
        assert table.list_leases().leases == ()
    finally:
        proxy.clear()
        clients.dynamodb.delete_table(TableName=table.table_name)


async def test_a_lease_table_deleted_while_running_stops_the_worker_with_exit_code_1(
    aws_clients: AwsClients,
    make_stream: Callable[[int], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    records = tmp_path / "records.jsonl"
    monkeypatch.setenv("KCL_TEST_RECORDS", str(records))
    stream = make_stream(2)
    put(aws_clients, stream, range(20))
    table_name = f"leases-{uuid.uuid4().hex[:12]}"
    plan = plan_worker(settings_for(stream, table_name), worker_id="w-1")
    worker = asyncio.create_task(run_worker(plan, aws_clients))
    await wait_until(
        lambda: sum(r["event"] == "record" for r in read_records(records)) >= 20, 30, "records delivered"
    )
    aws_clients.dynamodb.delete_table(TableName=table_name)
    deleted_at = time.monotonic()
    with caplog.at_level(logging.INFO):
        code = await asyncio.wait_for(worker, 30)
    assert code == ExitStatus.FAILED
    elapsed = time.monotonic() - deleted_at
    # documented: the worker stops once the table has been missing for the failover time (2 s here)
    assert 2.0 <= elapsed < 2.0 + 10.0, f"stopped {elapsed:.1f}s after the table was deleted"
    assert "the lease table has been missing" in caplog.text and "the worker cannot go on" in caplog.text
    assert {r["shard"] for r in read_records(records) if r["event"] == "lease_lost"} == {
        "shardId-000000000000",
        "shardId-000000000001",
    }, "every child heard leaseLost before the worker stopped"


def test_a_lease_created_before_its_reply_was_lost_is_reported_created(
    faulty_table: DynamoLeaseTable, proxy: FaultProxy
) -> None:
    child = Lease("shardId-child", TRIM_HORIZON, parent_shard_ids=frozenset({KEY}))
    proxy.set_rules(rule(Fault.ERROR_500, phase=Phase.AFTER, ops={"PutItem"}, limit=1))
    assert faulty_table.create_lease(child)  # the re-read finds it: created, not an error
    stored = faulty_table.get_lease("shardId-child", consistent=True)
    assert stored is not None and stored.parent_shard_ids == {KEY} and stored.lease_owner is None
    assert proxy.total_injected() == 1


def test_start_up_gives_up_with_a_clear_error_once_its_retries_are_used(
    proxy: FaultProxy, backend: Backend
) -> None:
    from kcl_daemon.errors import TransientNetwork
    from kcl_daemon.retry import RetryPolicy

    clients = clients_through(proxy, backend)
    quick = RetryPolicy("startup", max_attempts=3, deadline_s=5.0, initial_backoff_s=0.01, max_backoff_s=0.05)
    table = DynamoLeaseTable(clients.dynamodb, f"leases-{uuid.uuid4().hex[:12]}", setup_retry=quick)
    proxy.set_rules(rule(Fault.ERROR_500, ops={"DescribeTable"}))
    with pytest.raises(TransientNetwork, match=r"describe lease table .*InternalServerError"):
        table.create_table_if_missing(wait_s=5, poll_s=0.05)
    assert proxy.calls["DescribeTable"] == 3


CORRUPTIONS = {
    "throughputKBps": ("SET throughputKBps = :v", {":v": {"S": "fast"}}),
    "checkpoint": ("SET checkpoint = :v", {":v": {"S": "garbage"}}),
    "leaseCounter": ("REMOVE leaseCounter", None),
}


@pytest.mark.parametrize("attribute", sorted(CORRUPTIONS))
async def test_a_corrupt_attribute_on_a_held_lease_gives_up_that_lease_only(
    faulty_table: DynamoLeaseTable, aws_clients: AwsClients, caplog: pytest.LogCaptureFixture, attribute: str
) -> None:
    faulty_table.create_lease(Lease("shardId-000000000001", TRIM_HORIZON))
    coordinator, lost = coordinator_on(faulty_table)
    await coordinator.take_once()
    assert set(coordinator.held) == {KEY, "shardId-000000000001"}
    expression, values = CORRUPTIONS[attribute]
    aws_clients.dynamodb.update_item(
        TableName=faulty_table.table_name,
        Key={"leaseKey": {"S": KEY}},
        UpdateExpression=expression,
        **({"ExpressionAttributeValues": values} if values else {}),  # type: ignore[arg-type]
    )
    with caplog.at_level(logging.WARNING):
        await coordinator.renew_once()  # once: CorruptLeaseItem escaped and the renewer task died
        await coordinator.renew_once()
    assert lost == [KEY] and set(coordinator.held) == {"shardId-000000000001"}
    assert attribute in caplog.text
    assert await coordinator.take_once() is not None  # the taker skips the item and carries on
