"""Poison records end to end, to AWS destinations: an SQS queue and an S3 prefix on moto_server, a Kinesis
stream on kinesalite (the records come from kinesalite + dynalite). One daemon, 4 shards, 10,000 records,
one poison record; the shards run an unmodified amazon_kclpy processor and processors on the project's
Node and shell clients at once, and the one on the poison record's shard crashes on it (exits): the crash
reaches every destination, from a different client each time."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients, ClientSettings
from kcl_daemon.aws.dead_letter_puts import dead_letter_client
from kcl_daemon.dead_letters.letter import DeadLetter
from tests.support.daemon import run_cli
from tests.support.emulators import REGION, Backend
from tests.support.poison import (
    POISON,
    SHARDS,
    assert_nothing_lost_in_order,
    record_figures,
    run_poison_fleet,
)
from tests.support.requirements import require_tool
from tests.support.streams import new_stream

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


@pytest.fixture
def kinesalite(kinesalite_endpoint: str, dynalite_endpoint: str) -> tuple[Backend, AwsClients]:
    require_tool("node")
    require_tool("jq")
    backend = Backend("kinesalite+dynalite", kinesalite_endpoint, dynalite_endpoint)
    return backend, backend.clients()


def client(service: str, endpoint: str) -> Any:
    return dead_letter_client(ClientSettings(region=REGION), service, endpoint)


def test_sqs(tmp_path: Path, kinesalite: tuple[Backend, AwsClients], moto_endpoint: str) -> None:
    backend, clients = kinesalite
    sqs = client("sqs", moto_endpoint)
    queue = f"dlq-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=queue)["QueueUrl"]

    def letters() -> list[DeadLetter]:
        reply = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        return [DeadLetter.from_line(m["Body"]) for m in reply.get("Messages", [])]

    stream = new_stream(clients.kinesis, SHARDS, prefix="poison")
    run = run_poison_fleet(
        tmp_path,
        backend,
        clients,
        stream,
        f"sqs://{queue}",
        letters,
        client="kclpy",
        kind="crash",
        env={"AWS_ENDPOINT_URL_SQS": moto_endpoint},
    )
    assert_nothing_lost_in_order(run)
    assert {letter.failure.kind for letter in run.letters} == {"exit"}
    record_figures(run, "kclpy", "crash", "sqs://")


def test_s3(tmp_path: Path, kinesalite: tuple[Backend, AwsClients], moto_endpoint: str) -> None:
    backend, clients = kinesalite
    s3 = client("s3", moto_endpoint)
    bucket = f"dlq-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)

    def letters() -> list[DeadLetter]:
        keys = [item["Key"] for item in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
        assert all(key.startswith("dead/") and key.endswith(".json") for key in keys)
        return [
            DeadLetter.from_line(s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode())
            for key in keys
        ]

    stream = new_stream(clients.kinesis, SHARDS, prefix="poison")
    run = run_poison_fleet(
        tmp_path,
        backend,
        clients,
        stream,
        f"s3://{bucket}/dead",
        letters,
        client="shell",
        kind="crash",
        env={"AWS_ENDPOINT_URL_S3": moto_endpoint},
    )
    assert_nothing_lost_in_order(run)
    assert len(run.letters) == 1 and run.letters[0].failure.kind == "exit"
    record_figures(run, "shell", "crash", "s3://")


def test_kinesis(tmp_path: Path, kinesalite: tuple[Backend, AwsClients]) -> None:
    backend, clients = kinesalite
    kinesis = clients.kinesis
    target = new_stream(kinesis, 1, prefix="deadletters")
    shard = kinesis.list_shards(StreamName=target)["Shards"][0]["ShardId"]

    def letters() -> list[DeadLetter]:
        iterator = kinesis.get_shard_iterator(
            StreamName=target, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
        )
        records = kinesis.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
        return [DeadLetter.from_line(record["Data"].decode()) for record in records]

    stream = new_stream(kinesis, SHARDS, prefix="poison")
    run = run_poison_fleet(
        tmp_path, backend, clients, stream, f"kinesis://{target}", letters, client="node", kind="crash"
    )
    assert_nothing_lost_in_order(run)
    assert len(run.letters) == 1 and run.letters[0].failure.kind == "exit"
    # kcl-daemon dead-letters: list it, then put it back on its stream
    properties = tmp_path / "tool.properties"
    properties.write_text(
        f"streamName = {stream}\nregionName = {REGION}\nkinesisEndpoint = {backend.kinesis_endpoint}\n"
        f"deadLetterDestination = kinesis://{target}\n"
    )
    listed = run_cli("dead-letters", "list", "--properties", str(properties), timeout_s=60)
    assert listed.returncode == 0, listed.stderr
    assert "1 dead letter(s)" in listed.stdout and f"poison-{POISON}" not in listed.stdout
    back = run_cli("dead-letters", "replay", "--properties", str(properties), timeout_s=60)
    assert back.returncode == 0 and back.stdout.startswith("put "), back.stderr
    texts = []
    for shard_id in (s["ShardId"] for s in kinesis.list_shards(StreamName=stream)["Shards"]):
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
        )
        texts += [
            r["Data"]
            for r in kinesis.get_records(ShardIterator=iterator["ShardIterator"], Limit=10000)["Records"]
        ]
    assert texts.count(f"poison-{POISON}".encode()) == 2  # the original and the one put back
    record_figures(run, "node", "crash", "kinesis://")
