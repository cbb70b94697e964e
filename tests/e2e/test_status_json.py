"""``/status.json`` end to end on the emulators: a worker with the defaults (KCL 3.x mode) reading a stream
of 4 shards reports itself as the leader, every shard with its figures, and the fleet from its own scan;
the same data as the page, and never a record's payload."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend, free_port
from tests.support.figures import FIGURES
from tests.support.fleet import Fleet
from tests.support.streams import put

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def status(url: str) -> dict[str, Any] | None:
    """The JSON of ``/status.json``; None while nothing answers or the worker is starting (503)."""
    try:
        with urllib.request.urlopen(f"{url}/status.json", timeout=5) as response:  # noqa: S310 - loopback
            assert response.headers["Content-Type"] == "application/json"
            found: dict[str, Any] = json.loads(response.read())
            return found
    except urllib.error.HTTPError as exc:
        if exc.code != 503:
            raise
        return None
    except OSError:
        return None


def test_status_json_reports_the_worker_its_shards_and_the_fleet(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> None:
    stream = make_stream(4)
    shards = sorted(s["ShardId"] for s in aws_clients.kinesis.list_shards(StreamName=stream)["Shards"])
    fleet = Fleet(tmp_path, backend, lease_table.table_name, stream)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        fleet.start("json-worker", None, "--metrics-port", str(port))
        put(aws_clients, stream, range(60), prefix="secret-payload")

        def settled() -> bool:
            body = status(url)
            if body is None or sorted(s["shardId"] for s in body["shards"]) != shards:
                return False
            processed = all(s["state"] == "processing" and s["recordsDelivered"] > 0 for s in body["shards"])
            # the leader's first scan may come before its first assignment: wait for one after it
            owners = [(w["workerId"], w["leases"]) for w in body["fleet"]["workers"]]
            return processed and owners == [("json-worker", 4)]

        took = fleet.wait(settled, 90, "every shard processing and the fleet seen in /status.json")
        body = status(url)
        assert body is not None
        worker = body["worker"]
        assert worker["workerId"] == "json-worker"
        assert worker["leaseMode"].startswith("3.x leader"), worker
        assert worker["leader"] is True and worker["leaderId"] == "json-worker"
        assert worker["phase"] == "running"
        assert worker["health"]["status"] == "ok" and worker["ready"]["status"] == "ok", worker
        assert worker["stream"] == stream and worker["leaseTable"] == lease_table.table_name
        assert sum(s["recordsDelivered"] for s in body["shards"]) == 60
        for shard in body["shards"]:
            assert isinstance(shard["millisBehindLatest"], int), shard
            assert isinstance(shard["childPid"], int) and shard["childRestarts"] == 0, shard
            assert shard["checkpoint"] and shard["checkpointAgeSeconds"] is not None, shard
            assert shard["lagHistory"][-1] == shard["millisBehindLatest"]
        seen = body["fleet"]
        assert seen["totalLeases"] == 4 and seen["unownedCount"] == 0 and seen["expiredCount"] == 0, seen
        assert [(w["workerId"], w["leases"]) for w in seen["workers"]] == [("json-worker", 4)]
        assert "secret-payload" not in json.dumps(body)
        with urllib.request.urlopen(f"{url}/", timeout=5) as response:  # noqa: S310 - loopback
            page = response.read().decode()
        assert all(shard in page for shard in shards) and "secret-payload" not in page
        FIGURES[f"status.json on {backend.name}"] = (
            f"4 shards and the fleet's 4 leases on this worker {took:.1f}s after start"
        )
        assert fleet.daemons["json-worker"].stop() == 0
    finally:
        fleet.close()
