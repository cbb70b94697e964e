"""Dead letters: the JSON form round-trips, unreadable ones say why, the file sink reports a failed write
as retriable and names the file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from kcl_daemon.dead_letters.letter import BadDeadLetter, DeadLetter, Failure
from kcl_daemon.dead_letters.sinks import FileSink, read_file_letters, s3_key, shard_file_name
from kcl_daemon.errors import DeadLetterWriteFailed
from kcl_protocol import EncodedRecord, Record


def letter(stream: str | None = None) -> DeadLetter:
    return DeadLetter.of(
        Record(b"\x00\xffpayload", "pk-1", "49650000000000000000000000000000000000000000000000000042", 3, 17),
        shard_id="shardId-000000000007",
        stream=stream,
        application="orders",
        attempts=4,
        failure=Failure("exit", "child pid 9 exited with status 3", ("Traceback", "ValueError: x")),
        now=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )


def test_round_trip() -> None:
    original = letter()
    again = DeadLetter.from_line(original.to_line())
    assert again == original
    assert again.record() == Record(
        b"\x00\xffpayload", "pk-1", "49650000000000000000000000000000000000000000000000000042", 3, 17
    )
    assert original.to_json()["deadLetteredAt"] == "2026-01-02T03:04:05.000+00:00"
    assert original.name == "shardId-000000000007/49650000000000000000000000000000000000000000000000000042/3"


def test_an_encoded_record_keeps_its_base64() -> None:
    record = EncodedRecord("cGF5bG9hZA==", "pk", "1", 0, 0)
    made = DeadLetter.of(
        record, shard_id="s", stream=None, application="a", attempts=1, failure=Failure("x", "")
    )
    assert made.data_b64 == "cGF5bG9hZA==" and made.record().data == b"payload"


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("{not json", "not JSON"),
        ("[1]", "not a JSON object"),
        ('{"data":"eA==","partitionKey":"p","sequenceNumber":"1","subSequenceNumber":0}', "KeyError"),
        (
            '{"data":"eA==","partitionKey":"p","sequenceNumber":"1","subSequenceNumber":"x","shardId":"s",'
            '"failure":{"kind":"exit"}}',
            "ValueError",
        ),
    ],
)
def test_unreadable_letters_say_why(line: str, says: str) -> None:
    with pytest.raises(BadDeadLetter, match=says):
        DeadLetter.from_line(line)


def test_file_sink_appends_per_shard_and_reads_back(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / "a" / "b")
    sink.write(letter())
    sink.write(letter("111122223333:orders:1700000000"))
    with (tmp_path / "a" / "b" / "shardId-000000000007.jsonl").open("a") as file:
        file.write("garbage\n")
    found = list(read_file_letters(tmp_path / "a" / "b"))
    names = sorted(path.name for path, _, _ in found)
    assert names == [
        "111122223333_orders_1700000000~shardId-000000000007.jsonl",
        "shardId-000000000007.jsonl",
        "shardId-000000000007.jsonl",
    ]
    assert sum(isinstance(item, BadDeadLetter) for _, _, item in found) == 1


def test_a_failed_write_is_retriable_and_names_the_file(tmp_path: Path) -> None:
    blocker = tmp_path / "dead"
    blocker.write_text("a file where the directory should be")
    with pytest.raises(
        DeadLetterWriteFailed, match=r"cannot append to .*dead/shardId-000000000007\.jsonl"
    ) as caught:
        FileSink(blocker).write(letter())
    assert caught.value.retriable


def test_names_of_files_and_objects() -> None:
    assert shard_file_name("shardId-1", None) == "shardId-1.jsonl"
    assert shard_file_name("shardId-1", "acct:name:1") == "acct_name_1~shardId-1.jsonl"
    assert s3_key("dead/", letter()) == (
        "dead/orders/shardId-000000000007/49650000000000000000000000000000000000000000000000000042-3.json"
    )
