"""Enhanced fan-out on executors, through the project's SubscribeToShard test server over kinesalite,
with the query written in the awslabs connector's option names (only the format name changed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.emulators import REGION
from tests.support.fanout_server import FanoutServer
from tests.support.spark import numbered, put_numbered, rows, run_query
from tests.support.streams import kinesis_client, new_stream

# the first Spark test on a worker also waits for its SparkSession (JVMs) to start: 300 s, not 120
pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(300)]


def test_executors_read_through_one_consumer_registered_once_and_every_record_comes_once(
    spark_session: Any, kinesalite_endpoint: str, dynalite_endpoint: str, tmp_path: Path
) -> None:
    with FanoutServer(
        kinesalite_endpoint, page_limit=500, behind_on_full_pages=True, tip_event_s=0.3
    ) as server:
        kinesis = kinesis_client(server.endpoint)
        stream = new_stream(kinesis, 2, prefix="efo")
        put_numbered(kinesis, stream, 0, 3_000)
        options = {
            "kinesis.streamName": stream,
            "kinesis.region": REGION,
            "kinesis.endpointUrl": server.endpoint,
            "kinesis.startingPosition": "TRIM_HORIZON",
            "kinesis.consumerType": "SubscribeToShard",
            "kinesis.consumerName": "spark-efo-test",
            "kinesis.describeShardInterval": "0s",
            "kinesis.maxFetchRecordsPerShard": "1000",
            "dynamoDbEndpointUrl": dynalite_endpoint,
        }
        out, chk = tmp_path / "out", tmp_path / "chk"
        run_query(spark_session, options, out, chk)
        assert sorted(r["data"] for r in rows(out)) == numbered(3_000)
        assert sum(server.subscriptions.values()) >= 2 and set(server.subscriptions) == {
            "shardId-000000000000",
            "shardId-000000000001",
        }
        put_numbered(kinesis, stream, 3_000, 500)
        run_query(spark_session, options, out, chk)  # the query again: the consumer is reused
        found = rows(out)
        assert sorted(r["data"] for r in found) == numbered(3_500)
        assert len({(r["shardId"], r["sequenceNumber"]) for r in found}) == 3_500
        assert server.registrations == 1 and len(server.consumers) == 1
