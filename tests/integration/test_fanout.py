"""Enhanced fan-out against tests/support/fanout_server.py (SubscribeToShard with real event-stream
framing in front of kinesalite; DynamoDB: dynalite): the record source alone, and the whole daemon with
a recording processor (resubscribes, an injected stream error, a split mid-run, a slow child)."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kcl_daemon.aws.fanout import Fanout
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.core.sequence import TRIM_HORIZON
from kcl_daemon.retrieval.fanout import FanoutRecordSource
from kcl_daemon.retrieval.settings import RetrievalSettings
from kcl_daemon.retrieval.source import Batch
from tests.support.daemon import Daemon, run_cli
from tests.support.fanout_server import FanoutServer
from tests.support.paths import RECORDER
from tests.support.recorder import read_records
from tests.support.streams import kinesis_client, new_stream, put_texts, split_first

pytestmark = pytest.mark.integration


async def read_all(source: FanoutRecordSource, *, pause_s: float = 0.0) -> list[Batch]:
    batches: list[Batch] = []
    while True:
        batch = await asyncio.wait_for(source.next_batch(), timeout=30)
        if batch is None:
            return batches
        batches.append(batch)
        if pause_s:
            await asyncio.sleep(pause_s)


@pytest.fixture
def kinesalite(kinesalite_endpoint: str) -> Any:
    return kinesis_client(kinesalite_endpoint)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(4, thread_name_prefix="fanout-test") as executor:
        yield executor


def test_source_resubscribes_after_errors_and_timeouts_and_ends_with_the_children(
    kinesalite: Any, kinesalite_endpoint: str, pool: ThreadPoolExecutor
) -> None:
    stream = new_stream(kinesalite, 1)
    texts = [f"r{i:04d}" for i in range(300)]
    put_texts(kinesalite, stream, texts)
    parent = split_first(kinesalite, stream)
    with FanoutServer(kinesalite_endpoint, subscription_s=0.3, fail_every_events=2, page_limit=40) as server:
        fanout = Fanout(kinesis_client(server.endpoint))
        arn = fanout.ensure_consumer(fanout.stream_arn(stream), "efo-app")
        assert fanout.ensure_consumer(fanout.stream_arn(stream), "efo-app") == arn  # reused
        shard = next(s for s in Kinesis(kinesalite).list_shards(stream) if s.shard_id == parent)
        source = FanoutRecordSource(fanout, arn, shard, pool, RetrievalSettings())

        async def run() -> list[Batch]:
            await source.start(TRIM_HORIZON)
            try:
                return await read_all(source)
            finally:
                await source.aclose()

        batches = asyncio.run(run())
        assert [r.data.decode() for b in batches for r in b.records] == texts  # in order, exactly once
        assert source.child_shards is not None
        assert len(source.child_shards) == 2
        assert all(c.parent_shard_ids == (parent,) for c in source.child_shards)
        assert server.subscriptions[parent] >= 300 // 40 // 2  # an injected error every 2 events
        assert source.stats.resubscribes_after_error >= 2


def test_an_idle_shard_outlasting_the_read_timeout_is_resubscribed_not_failed(
    kinesalite: Any, kinesalite_endpoint: str, pool: ThreadPoolExecutor
) -> None:
    stream = new_stream(kinesalite, 1)
    with FanoutServer(kinesalite_endpoint) as server:
        fanout = Fanout(kinesis_client(server.endpoint, read_timeout_s=0.5))
        arn = fanout.ensure_consumer(fanout.stream_arn(stream), "efo-idle")
        shard = Kinesis(kinesalite).list_shards(stream)[0]
        source = FanoutRecordSource(fanout, arn, shard, pool, RetrievalSettings())

        async def run() -> list[str]:
            await source.start(TRIM_HORIZON)
            try:
                reading = asyncio.ensure_future(source.next_batch())
                await asyncio.sleep(2.0)  # four read timeouts with nothing to read
                put_texts(kinesalite, stream, ["late"])
                batch = await asyncio.wait_for(reading, timeout=30)
                assert batch is not None
                return [r.data.decode() for r in batch.records]
            finally:
                await source.aclose()

        assert asyncio.run(run()) == ["late"]
        assert server.subscriptions[shard.shard_id] >= 3
        assert source.stats.resubscribes_after_error == 0


def test_a_slow_reader_holds_the_server_back(
    kinesalite: Any, kinesalite_endpoint: str, pool: ThreadPoolExecutor
) -> None:
    stream = new_stream(kinesalite, 1)
    texts = [f"big{i:04d}" for i in range(400)]
    put_texts(kinesalite, stream, texts, size=20_000)  # 8 MB: more than the socket buffers hold
    with FanoutServer(kinesalite_endpoint, page_limit=10) as server:
        fanout = Fanout(kinesis_client(server.endpoint))
        arn = fanout.ensure_consumer(fanout.stream_arn(stream), "efo-slow")
        shard = Kinesis(kinesalite).list_shards(stream)[0]
        source = FanoutRecordSource(fanout, arn, shard, pool, RetrievalSettings(), queue_size=1)

        async def run() -> tuple[int, list[str]]:
            await source.start(TRIM_HORIZON)
            try:
                first = await source.next_batch()
                assert first is not None
                await asyncio.sleep(2.0)  # a slow child: nothing read for 2 s
                held_back = server.events_sent[shard.shard_id]
                texts_read = [r.data.decode().rstrip(".") for r in first.records]
                while len(texts_read) < len(texts):
                    batch = await asyncio.wait_for(source.next_batch(), timeout=30)
                    assert batch is not None
                    texts_read += [r.data.decode().rstrip(".") for r in batch.records]
                return held_back, texts_read
            finally:
                await source.aclose()

        held_back, texts_read = asyncio.run(run())
        assert texts_read == texts
        assert held_back < len(texts) // 10  # the server could not send everything while nobody read


def test_daemon_with_fanout_delivers_every_record_once_across_resubscribes_a_split_and_a_slow_child(
    tmp_path: Path, kinesalite: Any, kinesalite_endpoint: str, dynalite_endpoint: str
) -> None:
    stream = new_stream(kinesalite, 2)
    before = [f"a{i:04d}" for i in range(200)]
    put_texts(kinesalite, stream, before)
    records = tmp_path / "records.jsonl"
    with FanoutServer(kinesalite_endpoint, subscription_s=1.0, fail_every_events=5, page_limit=30) as server:
        properties = tmp_path / "app.properties"
        app = f"efo-{uuid.uuid4().hex[:8]}"
        properties.write_text(
            f"executableName = {sys.executable} {RECORDER}\n"
            f"applicationName = {app}\n"
            f"streamName = {stream}\n"
            "regionName = us-east-1\n"
            "retrievalMode = FANOUT\n"
            f"kinesisEndpoint = {server.endpoint}\n"
            f"dynamoDBEndpoint = {dynalite_endpoint}\n"
            "initialPositionInStream = TRIM_HORIZON\n"
            "failoverTimeMillis = 2000\n"
            "parentShardPollIntervalMillis = 500\n"
            "shardSyncIntervalMillis = 1000\n"
            "childStopTimeoutMillis = 2000\n"
        )
        env = {"KCL_TEST_RECORDS": str(records), "KCL_TEST_SLEEP_S": "0.1"}
        log = tmp_path / "daemon.log"
        daemon = Daemon("run", properties=properties, log=log, env=env, cwd=tmp_path)
        try:

            def rows(event: str = "record") -> list[dict[str, Any]]:
                return read_records(records, event)

            def wait(check: Any, what: str, limit_s: float = 60.0) -> None:
                deadline = time.monotonic() + limit_s
                while not check():
                    assert daemon.exit_status is None, f"daemon exited:\n{log.read_text()[-4000:]}"
                    assert time.monotonic() < deadline, f"{what}:\n{log.read_text()[-4000:]}"
                    time.sleep(0.1)

            wait(lambda: len(rows()) >= 50, "first records")
            parent = split_first(kinesalite, stream)
            after = [f"b{i:04d}" for i in range(200)]
            put_texts(kinesalite, stream, after)
            wanted = set(before) | set(after)
            wait(lambda: {r["data"] for r in rows()} >= wanted, "every record")
            wait(lambda: any(r["shard"] == parent for r in rows("shard_ended")), "the parent's shard end")
        finally:
            code = daemon.stop(signal.SIGTERM, timeout_s=30)
        counts = Counter(r["data"] for r in rows())
        assert set(counts) == wanted
        assert max(counts.values()) == 1, [d for d, n in counts.items() if n > 1][:5]
        assert code == 0
        assert sum(server.subscriptions.values()) > 3  # resubscribed after errors and timeouts
        assert "fan-out through consumer" in log.read_text()
        consumers = kinesis_client(server.endpoint).list_stream_consumers(
            StreamARN=kinesalite.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"][
                "StreamARN"
            ]
        )["Consumers"]
        assert [c["ConsumerName"] for c in consumers] == [app]  # registered once, never deregistered
        for expected in ("deregistered stream consumer", "no stream consumer"):
            done = run_cli("deregister-consumer", properties=properties)
            assert done.returncode == 0, done.stderr
            assert done.stdout.startswith(expected), done.stdout
        assert not server.consumers
