"""Kinesis streams on an emulator: waiting for one to be ACTIVE, putting numbered records, resharding."""

from __future__ import annotations

import time
import uuid
from typing import Any

import boto3  # noqa: TID251 - a plain client, one attempt: what the test sees is what the service did
from botocore.config import Config  # noqa: TID251
from botocore.exceptions import ConnectionClosedError  # noqa: TID251

from kcl_daemon.aws.clients import AwsClients
from tests.support.emulators import REGION


def kinesis_client(endpoint: str, read_timeout_s: float = 30) -> Any:
    """A plain boto3 Kinesis client for ``endpoint`` that never retries."""
    return boto3.session.Session(region_name=REGION).client(
        "kinesis",
        endpoint_url=endpoint,
        config=Config(retries={"total_max_attempts": 1}, read_timeout=read_timeout_s),
    )


def wait_active(kinesis: Any, name: str, timeout_s: float = 10.0) -> None:
    """Wait until stream ``name`` is ACTIVE (``kinesis``: a boto3 Kinesis client)."""
    deadline = time.monotonic() + timeout_s
    while (
        kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamStatus"]
        != "ACTIVE"
    ):
        assert time.monotonic() < deadline, f"stream {name} never became ACTIVE"
        time.sleep(0.02)


def wait_for_stream(clients: AwsClients, name: str, timeout_s: float = 10.0) -> None:
    wait_active(clients.kinesis, name, timeout_s)


def put(clients: AwsClients, stream: str, numbers: range, *, prefix: str = "record") -> dict[str, str]:
    """Put ``<prefix>-<n>`` with partition key ``key-<n>`` for each n, in order; returns the last sequence
    number per shard."""
    last: dict[str, str] = {}
    numbers_list = list(numbers)
    for offset in range(0, len(numbers_list), 250):
        chunk = numbers_list[offset : offset + 250]
        entries = [{"Data": f"{prefix}-{n}".encode(), "PartitionKey": f"key-{n}"} for n in chunk]
        try:
            response = clients.kinesis.put_records(StreamName=stream, Records=entries)  # type: ignore[arg-type]
        except ConnectionClosedError:
            # a pooled keep-alive connection the emulator (Node: 5 s idle) closed as the request went out:
            # reset before it was read, so sent again once (seen once in a full run, after a SIGKILL wait)
            response = clients.kinesis.put_records(StreamName=stream, Records=entries)  # type: ignore[arg-type]
        assert response.get("FailedRecordCount", 0) == 0
        for result in response["Records"]:
            last[result["ShardId"]] = result["SequenceNumber"]
    return last


def new_stream(kinesis: Any, shards: int, prefix: str = "efo") -> str:
    """A fresh ACTIVE stream of ``shards`` shards (``kinesis``: a boto3 Kinesis client)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(StreamName=name, ShardCount=shards)
    wait_active(kinesis, name)
    return name


def put_texts(kinesis: Any, stream: str, texts: list[str], size: int = 0, key: str | None = None) -> None:
    """Put each text (padded with dots to ``size`` bytes), keyed by itself unless ``key`` is given."""
    for start in range(0, len(texts), 100):
        entries = [
            {"Data": (text.ljust(size, ".")).encode(), "PartitionKey": key or text}
            for text in texts[start : start + 100]
        ]
        assert kinesis.put_records(StreamName=stream, Records=entries)["FailedRecordCount"] == 0


def split_first(kinesis: Any, stream: str) -> str:
    """Split the first listed shard in the middle of its range; returns the parent's shard id."""
    shard = kinesis.list_shards(StreamName=stream)["Shards"][0]
    low, high = int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"])
    kinesis.split_shard(
        StreamName=stream, ShardToSplit=shard["ShardId"], NewStartingHashKey=str((low + high) // 2)
    )
    wait_active(kinesis, stream)
    return str(shard["ShardId"])
