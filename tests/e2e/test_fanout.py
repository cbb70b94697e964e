"""Enhanced fan-out end to end: a `kcl-daemon run` process reads through tests/support/fanout_server.py
(SubscribeToShard with real event-stream framing in front of kinesalite; DynamoDB: dynalite) with a
recording processor, across resubscribes, an injected stream error, a split mid-run and a slow child;
`kcl-daemon deregister-consumer` then removes its consumer."""

from __future__ import annotations

import signal
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import Daemon, run_cli
from tests.support.fanout_server import FanoutServer
from tests.support.paths import RECORDER
from tests.support.recorder import read_records
from tests.support.streams import kinesis_client, new_stream, put_texts, split_first

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


@pytest.fixture
def kinesalite(kinesalite_endpoint: str) -> Any:
    return kinesis_client(kinesalite_endpoint)


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
