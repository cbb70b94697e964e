"""A shard consumer whose real child uses the log/metric channel: its lines are logged under the shard,
its metrics exported and its drops counted; a child not offered the channel writes none."""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest

from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.lifecycle.shard_consumer import ConsumerSettings, ShardConsumer
from kcl_daemon.metrics.registry import DaemonMetrics
from kcl_daemon.process.child import ChildProcess
from kcl_daemon.retrieval.source import Batch
from kcl_protocol import Record

CHANNEL_CHILD = r"""
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    action = message["action"]
    if action == "processRecords" and "channel" in OFFERED:
        for out in (
            {"action": "log", "level": "warning", "message": "from the child"},
            {"action": "metric", "name": "orders", "value": 3, "unit": "Count", "dimensions": {"r": "eu"}},
            {"action": "metric", "name": "bad name", "value": 1},
        ):
            sys.stdout.write(json.dumps(out) + "\n")
    if action == "initialize" and message.get("channel"):
        OFFERED.append("channel")
    sys.stdout.write(json.dumps({"action": "status", "responseFor": action}) + "\n")
    sys.stdout.flush()
"""


class OneBatch:
    def __init__(self) -> None:
        self.done = asyncio.Event()
        self._sent = False

    async def start(self, after: ExtendedSequenceNumber) -> None:
        pass

    async def next_batch(self) -> Batch | None:
        if not self._sent:
            self._sent = True
            return Batch((Record(b"x", "pk", "1", 0, 1_700_000_000_000),), 0)
        self.done.set()
        await asyncio.Event().wait()
        return None


class Store:
    async def load(self) -> ExtendedSequenceNumber:
        return ExtendedSequenceNumber("TRIM_HORIZON")

    async def save(self, target: ExtendedSequenceNumber) -> None:
        pass


@pytest.mark.parametrize("offered", [True, False])
async def test_a_child_logs_under_the_shard_and_its_metrics_are_exported(
    offered: bool, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = DaemonMetrics(process_metrics=False)

    async def launch() -> ChildProcess:
        code = "OFFERED = []\n" + CHANNEL_CHILD
        return await ChildProcess.spawn((sys.executable, "-c", code), line_limit_bytes=1 << 20)

    source = OneBatch()
    settings = ConsumerSettings(child_channel=offered)
    consumer = ShardConsumer(
        "shardId-7", source, Store(), launch, settings, observer=metrics.shard("shardId-7")
    )
    with caplog.at_level(logging.INFO):
        running = asyncio.create_task(consumer.run())
        await asyncio.wait_for(source.done.wait(), 20)
        consumer.request_shutdown()
        await asyncio.wait_for(running, 20)
    samples = {(s.family, s.labels): (s.value, s.count) for s in metrics.snapshot()}
    child_lines = [
        r for r in caplog.records if r.name == "kcl_daemon.child" and "from the child" in r.message
    ]
    if not offered:
        assert child_lines == [] and not any(f == "kcl_child_metric" for f, _ in samples)
        return
    assert [r.levelno for r in child_lines] == [logging.WARNING]
    key = ("kcl_child_metric", (("dimensions", "r=eu"), ("name", "orders"), ("unit", "Count")))
    assert samples[key] == (3.0, 1.0)
    assert samples[("kcl_child_channel_dropped", (("reason", "invalid"),))][0] == 1
    assert samples[("kcl_child_log_lines", (("level", "warning"),))][0] == 1
