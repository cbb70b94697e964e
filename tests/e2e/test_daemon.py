"""kcl-daemon as users run it: separate daemon processes sharing a stream, on both emulators.

Each daemon is ``python -m kcl_daemon run --properties FILE`` (``tests.support.fleet``) with the endpoints
in the properties file and dummy credentials in the environment. Processors are real child processes:
our Python client's recording processor (every record into one JSON-lines file) and amazon_kclpy's
unmodified sample.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.fleet import FAILOVER_S, TAKE_EVERY_S, Fleet, owners
from tests.support.paths import VENV_BIN
from tests.support.recorder import data_of
from tests.support.streams import put, wait_for_stream

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

KCLPY_SAMPLE = VENV_BIN / "sample_kclpy_app.py"


@pytest.fixture
def fleet(
    tmp_path: Path, backend: Backend, lease_table: DynamoLeaseTable, make_stream: Callable[[int], str]
) -> Iterator[Fleet]:
    # The daemon creates its own table: hand it a fresh name, and the fixture's table only for cleanup.
    fleet = Fleet(tmp_path, backend, lease_table.table_name, make_stream(4))
    yield fleet
    fleet.close()


def test_two_daemons_share_the_shards_and_sigterm_hands_over_without_loss(
    fleet: Fleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable, backend: Backend
) -> None:
    put(aws_clients, fleet.stream, range(1000))
    started = time.monotonic()
    a = fleet.start("daemon-a")
    fleet.wait(lambda: bool(fleet.recorded()), 20, "first record delivered")
    first_record_s = time.monotonic() - started
    fleet.start("daemon-b")
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(1000)}, 60, "1000 records")
    fleet.wait(lambda: sorted(owners(lease_table).values()) == [2, 2], 60, "2/2 balance")

    put(aws_clients, fleet.stream, range(1000, 2000))
    stop_started = time.monotonic()
    assert a.stop(signal.SIGTERM) == 0, a.tail()
    stop_s = time.monotonic() - stop_started
    assert "lease(s) released" in a.log.read_text()
    took = fleet.wait(
        lambda: owners(lease_table) == {"daemon-b": 4}, 3 * TAKE_EVERY_S, "daemon-b holds all 4"
    )
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(2000)}, 60, "2000 records")
    assert fleet.daemons["daemon-b"].stop(signal.SIGTERM) == 0
    FIGURES[f"daemons on {backend.name}"] = (
        f"first record {first_record_s:.1f}s after start; SIGTERM stop {stop_s:.1f}s; "
        f"released leases taken over in {took:.1f}s"
    )
    shutdowns = fleet.recorded("shutdown")
    assert {row["worker"] for row in shutdowns} == {"daemon-a", "daemon-b"}
    for lease in lease_table.list_leases(consistent=True).leases:
        assert lease.lease_owner is None and lease.checkpoint.sequence_number.isdigit()


def test_sigkill_one_daemon_and_the_other_continues_from_the_checkpoints(
    fleet: Fleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable, backend: Backend
) -> None:
    put(aws_clients, fleet.stream, range(400))
    a = fleet.start("daemon-a")
    fleet.start("daemon-b")
    fleet.wait(lambda: sorted(owners(lease_table).values()) == [2, 2], 60, "2/2 balance")
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(400)}, 60, "400 records")
    held_by_a = {
        lease.lease_key for lease in lease_table.list_leases().leases if lease.lease_owner == "daemon-a"
    }

    a.stop(signal.SIGKILL)
    killed_at = time.monotonic()
    fleet.wait(lambda: owners(lease_table) == {"daemon-b": 4}, 30, "daemon-b takes the dead daemon's leases")
    took = time.monotonic() - killed_at
    put(aws_clients, fleet.stream, range(400, 800))
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(800)}, 60, "800 records")
    # KCL 2.x expiry is a local observation: the first scan after the kill still sees the last
    # renewal's counter change, so the lease counts as expired one scan later. A kill is therefore
    # noticed after one to two taker intervals: failover + one interval when the kill falls early in
    # the survivor's taker cycle, failover + two at worst. The exact bound is checked in simulated
    # time (test_lease_fleet.py); here a loaded CI machine gets a few seconds of slack.
    bound = FAILOVER_S + TAKE_EVERY_S
    FIGURES[f"SIGKILL takeover on {backend.name}"] = (
        f"{took:.1f}s after the kill (failover + one taker interval = {bound:.1f}s, + two = "
        f"{bound + TAKE_EVERY_S:.1f}s)"
    )
    assert took <= bound + TAKE_EVERY_S + 5.0, f"takeover took {took:.1f}s"
    # From the checkpoints: daemon-b re-read nothing before the dead daemon's last checkpoints.
    after_kill = [
        row for row in fleet.recorded() if row["worker"] == "daemon-b" and row["shard"] in held_by_a
    ]
    redelivered = data_of(after_kill) & {f"record-{n}" for n in range(400)}
    assert len(redelivered) <= 4 * 100, "at most the last uncheckpointed batch per shard comes again"


@pytest.mark.clients
def test_amazon_kclpy_sample_under_two_daemons_checkpoints_every_shard(
    fleet: Fleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable
) -> None:
    assert KCLPY_SAMPLE.exists(), "amazon_kclpy is installed by scripts/bootstrap.sh"
    last = put(aws_clients, fleet.stream, range(2000))
    a = fleet.start("daemon-a", str(KCLPY_SAMPLE))
    b = fleet.start("daemon-b", str(KCLPY_SAMPLE))

    def all_initialized() -> bool:
        text = a.log.read_text() + b.log.read_text()
        return sum(text.count(f"{shard}") > 0 for shard in last) == 4 and text.count("-> processing") >= 4

    fleet.wait(all_initialized, 60, "every shard processing")
    time.sleep(3 * 0.2 * 2)  # a few reads: 2000 records are 500 per shard, one GetRecords each
    assert a.stop() == 0 and b.stop() == 0, fleet.logs()
    # The sample checkpoints on shutdownRequested: every shard's checkpoint is its last record.
    checkpoints = {
        lease.lease_key: lease.checkpoint.sequence_number for lease in lease_table.list_leases().leases
    }
    assert checkpoints == last, fleet.logs()


def test_a_split_and_a_merge_mid_run_keep_parents_before_children(
    fleet: Fleet, aws_clients: AwsClients, backend: Backend
) -> None:
    if backend.name == "moto":
        pytest.skip("moto never ends a closed shard that was open when it was first read (see README)")
    kinesis = aws_clients.kinesis
    put(aws_clients, fleet.stream, range(200))
    fleet.start("daemon-a")
    fleet.start("daemon-b")
    fleet.wait(lambda: len(data_of(fleet.recorded())) >= 200, 60, "200 records before resharding")

    shards = sorted(
        kinesis.list_shards(StreamName=fleet.stream)["Shards"],
        key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]),
    )
    first = shards[0]
    middle = (
        int(first["HashKeyRange"]["StartingHashKey"]) + int(first["HashKeyRange"]["EndingHashKey"])
    ) // 2
    kinesis.split_shard(
        StreamName=fleet.stream, ShardToSplit=first["ShardId"], NewStartingHashKey=str(middle)
    )
    wait_for_stream(aws_clients, fleet.stream)
    kinesis.merge_shards(
        StreamName=fleet.stream, ShardToMerge=shards[2]["ShardId"], AdjacentShardToMerge=shards[3]["ShardId"]
    )
    wait_for_stream(aws_clients, fleet.stream)
    put(aws_clients, fleet.stream, range(200, 600))
    fleet.wait(lambda: len(data_of(fleet.recorded())) >= 600, 90, "600 records across the reshard")

    listed = kinesis.list_shards(StreamName=fleet.stream)["Shards"]
    parents_of = {
        s["ShardId"]: [p for p in (s.get("ParentShardId"), s.get("AdjacentParentShardId")) if p]
        for s in listed
    }
    order = {}
    rows = fleet.recorded()
    for index, row in enumerate(rows):
        order.setdefault(row["shard"], []).append(index)
    children = [s for s, parents in parents_of.items() if parents and s in order]
    assert len(children) == 3, (children, parents_of)
    for child in children:
        for parent in parents_of[child]:
            assert max(order[parent]) < min(order[child]), f"{child} started before parent {parent} finished"
    ended = {row["shard"] for row in fleet.recorded("shard_ended")}
    assert {shards[0]["ShardId"], shards[2]["ShardId"], shards[3]["ShardId"]} <= ended
