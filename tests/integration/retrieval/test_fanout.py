"""Enhanced fan-out's record source against tests/support/fanout_server.py (SubscribeToShard with real
event-stream framing in front of kinesalite): resubscribes after errors and timeouts, an idle shard, a slow
reader holding the server back. The whole daemon over it: tests/e2e/test_fanout.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kcl_daemon.aws.fanout import Fanout
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.core.sequence import TRIM_HORIZON
from kcl_daemon.retrieval.fanout import FanoutRecordSource
from kcl_daemon.retrieval.settings import RetrievalSettings
from kcl_daemon.retrieval.source import Batch
from tests.support.fanout_server import FanoutServer
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
