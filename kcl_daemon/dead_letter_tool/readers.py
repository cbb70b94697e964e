"""Read the dead letters of a destination (without removing them).

* ``file://``: every ``*.jsonl`` of the directory;
* ``sqs://``: the messages visible now (received with a visibility timeout of 0, so they stay);
* ``s3://``: every object under the prefix;
* ``kinesis://``: every record of every shard, from TRIM_HORIZON.

A letter that cannot be read is reported with where it is, never skipped silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kcl_daemon.aws.clients import ClientSettings
from kcl_daemon.aws.dead_letter_puts import S3Puts, SqsPuts, dead_letter_client
from kcl_daemon.aws.errors import map_aws_errors
from kcl_daemon.core.lifecycle.dead_letter_address import DeadLetterAddress, Scheme
from kcl_daemon.dead_letters.letter import BadDeadLetter, DeadLetter
from kcl_daemon.dead_letters.sinks import read_file_letters

if TYPE_CHECKING:
    from mypy_boto3_kinesis import KinesisClient

#: at most this many SQS receives (10 messages each) per listing
SQS_MAX_RECEIVES = 100


@dataclass(frozen=True, slots=True)
class Found:
    letters: list[DeadLetter]
    unreadable: list[str]  # "where: why"


def read_letters(address: DeadLetterAddress, clients: ClientSettings) -> Found:
    letters: list[DeadLetter] = []
    unreadable: list[str] = []

    def take(where: str, text: str) -> None:
        try:
            letters.append(DeadLetter.from_line(text))
        except BadDeadLetter as bad:
            unreadable.append(f"{where}: {bad}")

    match address.scheme:
        case Scheme.FILE:
            directory = Path(address.target)
            if directory.is_dir():
                for path, number, item in read_file_letters(directory):
                    if isinstance(item, DeadLetter):
                        letters.append(item)
                    else:
                        unreadable.append(f"{path}:{number}: {item}")
        case Scheme.SQS:
            puts = SqsPuts(dead_letter_client(clients, "sqs"), address.target)
            seen: set[str] = set()
            for _ in range(SQS_MAX_RECEIVES):
                messages = [m for m in puts.receive() if m["MessageId"] not in seen]
                if not messages:
                    break
                for message in messages:
                    seen.add(message["MessageId"])
                    take(f"message {message['MessageId']}", message["Body"])
        case Scheme.S3:
            s3 = S3Puts(dead_letter_client(clients, "s3"), address.target)
            for key in s3.keys(address.prefix):
                take(f"s3://{address.target}/{key}", s3.get(key).decode("utf-8", errors="replace"))
        case Scheme.KINESIS:
            for where, data in _stream_records(dead_letter_client(clients, "kinesis"), address.target):
                take(where, data.decode("utf-8", errors="replace"))
    letters.sort(key=lambda x: (x.stream or "", x.shard_id, int(x.sequence_number), x.sub_sequence_number))
    return Found(letters, unreadable)


def _stream_records(kinesis: KinesisClient, stream: str) -> list[tuple[str, bytes]]:
    found: list[tuple[str, bytes]] = []
    with map_aws_errors(f"reading {stream}"):
        shards = kinesis.list_shards(StreamName=stream)["Shards"]
        for shard in shards:
            iterator: str | None = kinesis.get_shard_iterator(
                StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            while iterator:
                page = kinesis.get_records(ShardIterator=iterator, Limit=1000)
                for record in page["Records"]:
                    found.append((f"{stream}/{shard['ShardId']}/{record['SequenceNumber']}", record["Data"]))
                if not page["Records"] and page.get("MillisBehindLatest", 0) == 0:
                    break
                iterator = page.get("NextShardIterator")
    return found
