"""The dead-letter destination down for 30 s: a Kinesis stream on kinesalite whose PutRecord calls fail
(the fault proxy answers 500) while the records are read through the same proxy. Nothing is checkpointed
past the poison record meanwhile, nothing is lost, and processing resumes by itself once it is back.
The shards run amazon_kclpy, Node and shell processors at once; the amazon_kclpy one raises on the
poison record (its wrapper answers the batch anyway): the 4-shard case of that failure."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.dead_letters.letter import DeadLetter
from tests.support.emulators import Backend
from tests.support.fault_proxy import Fault, FaultProxy, rule
from tests.support.figures import FIGURES
from tests.support.poison import SHARDS, Outage, assert_nothing_lost_in_order, run_poison_fleet
from tests.support.requirements import require_tool
from tests.support.streams import new_stream

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

OUTAGE_S = 30.0


def test_the_destination_down_for_30_s(
    tmp_path: Path, kinesalite_endpoint: str, dynalite_endpoint: str
) -> None:
    require_tool("node")
    require_tool("jq")
    with FaultProxy(kinesalite_endpoint, seed=31) as proxy:
        backend = Backend("kinesalite+dynalite via proxy", proxy.endpoint, dynalite_endpoint)
        clients = Backend("kinesalite+dynalite", kinesalite_endpoint, dynalite_endpoint).clients()
        target = new_stream(clients.kinesis, 1, prefix="deadletters")
        shard = clients.kinesis.list_shards(StreamName=target)["Shards"][0]["ShardId"]

        def letters() -> list[DeadLetter]:
            iterator = clients.kinesis.get_shard_iterator(
                StreamName=target, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
            )
            records = clients.kinesis.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
            return [DeadLetter.from_line(record["Data"].decode()) for record in records]

        proxy.set_rules(rule(Fault.ERROR_500, ops=["PutRecord"]))
        back_at: list[float] = []

        def outage(state: Outage) -> None:
            state.fleet.wait(lambda: proxy.total_injected() > 0, 60, "the first dead-letter write failed")
            down_since = time.monotonic()
            poison = ExtendedSequenceNumber(state.poison_seq, 0)
            while time.monotonic() - down_since < OUTAGE_S:
                for lease in state.leases.list_leases(consistent=True).leases:
                    if lease.shard_id == state.poison_shard:
                        assert lease.checkpoint < poison, (
                            f"checkpointed past the poison record: {lease.checkpoint}"
                        )
                assert not letters()
                time.sleep(1.0)
            proxy.clear()
            back_at.append(time.time())

        stream = new_stream(clients.kinesis, SHARDS, prefix="poison")
        run = run_poison_fleet(
            tmp_path,
            backend,
            clients,
            stream,
            f"kinesis://{target}",
            letters,
            client="kclpy",
            kind="error",
            during=outage,
        )
    assert_nothing_lost_in_order(run)
    assert len(run.letters) == 1 and run.letters[0].failure.kind == "exception"
    assert "waits: the dead-letter destination" in run.log
    moved_on = min(
        p["t"] for p in run.processed if p["shard"] == run.poison_events[0]["shard"] and p["t"] > back_at[0]
    )
    FIGURES["poison record, destination down 30 s: destination back -> shard moves on"] = (
        f"{moved_on - back_at[0]:.1f} s ({proxy.total_injected()} dead-letter writes failed meanwhile)"
    )
