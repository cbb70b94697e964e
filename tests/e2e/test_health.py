"""`run --metrics-port` end to end on the emulators: /readyz turns red for a stalled shard (its processor
holds a batch) and for a lease table that stops answering (the fault proxy drops every DynamoDB call),
says why, and turns green again after recovery; /healthz stays green meanwhile (neither is a reason to
restart the daemon)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend, free_port
from tests.support.fault_proxy import Fault, FaultProxy, rule
from tests.support.fleet import Fleet
from tests.support.health import ask, failing_checks
from tests.support.streams import put

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

PHASE1 = (
    "clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1\n"  # the taker: leases at once
)


def metrics_args(port: int) -> tuple[str, ...]:
    return ("--metrics-port", str(port))


def test_a_stalled_shard_turns_readyz_red_and_green_again(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> None:
    stream = make_stream(1)
    fleet = Fleet(
        tmp_path, backend, lease_table.table_name, stream, extra=PHASE1 + "shardStallMillis = 1500\n"
    )
    pause = tmp_path / "pause"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        fleet.start("stalls", None, *metrics_args(port), env={"KCL_TEST_PAUSE_FILE": str(pause)})
        fleet.wait(lambda: ask(url, "/readyz")[0] == 200, 30, "ready")
        pause.touch()
        put(aws_clients, stream, range(20))
        fleet.wait(lambda: "shards" in failing_checks(ask(url, "/readyz")[1]), 20, "a stalled shard")
        status, body = ask(url, "/readyz")
        assert status == 503 and "behind, nothing processed" in failing_checks(body)["shards"], body
        assert ask(url, "/healthz")[0] == 200
        pause.unlink()
        fleet.wait(lambda: ask(url, "/readyz")[0] == 200, 20, "ready again")
        assert fleet.daemons["stalls"].stop() == 0
    finally:
        fleet.close()


@pytest.fixture
def proxy(backend: Backend) -> Iterator[FaultProxy]:
    with FaultProxy(backend.dynamodb_endpoint, seed=3) as started:
        yield started


def test_a_lost_lease_table_turns_readyz_red_and_green_again(
    tmp_path: Path,
    backend: Backend,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
    proxy: FaultProxy,
) -> None:
    through_proxy = Backend(backend.name, backend.kinesis_endpoint, proxy.endpoint)
    fleet = Fleet(tmp_path, through_proxy, lease_table.table_name, make_stream(1), extra=PHASE1)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        fleet.start("cut-off", None, *metrics_args(port))
        fleet.wait(lambda: ask(url, "/readyz")[0] == 200, 30, "ready")
        proxy.set_rules(rule(Fault.DROP))  # every DynamoDB call: the connection closes without an answer
        fleet.wait(lambda: "lease-table" in failing_checks(ask(url, "/readyz")[1]), 20, "the table lost")
        detail = failing_checks(ask(url, "/readyz")[1])["lease-table"]
        assert f"{lease_table.table_name} has failed every call" in detail, detail
        assert ask(url, "/healthz")[0] == 200  # unreachable is not wedged: a restart would not help
        proxy.clear()
        fleet.wait(lambda: ask(url, "/readyz")[0] == 200, 30, "ready again")
        assert fleet.daemons["cut-off"].stop() == 0
    finally:
        fleet.close()
