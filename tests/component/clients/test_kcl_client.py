"""Unit tests of kcl_client: the processor API, checkpointing and the protocol rules, over in-memory pipes.

Most tests script the daemon side as a list of messages, run the processor with ``run(..., stdin=BytesIO,
stdout=BytesIO)`` and compare what it wrote. The reply to a checkpoint request is simply the next scripted
line, which is exactly the protocol's rule. A few tests use real pipes or a real child process.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest

from kcl_client import (
    RETRIABLE_ERRORS,
    Checkpointer,
    CheckpointError,
    Position,
    ProcessRecordsInput,
    ProtocolError,
    Record,
    RecordProcessor,
    run,
)
from tests.support.paths import REPO

SEQ_A = "49590338271490256608559692538361571095921575989136588898"
SEQ_B = "49590338271490256608559692540925702759324208523137515618"


# --------------------------------------------------------------------------------------------------
# helpers


def record(payload: bytes | str, seq: str, sub: int | None = 0, pk: str = "pk") -> dict[str, Any]:
    data = payload.encode() if isinstance(payload, str) else payload
    return {
        "data": base64.b64encode(data).decode(),
        "partitionKey": pk,
        "sequenceNumber": seq,
        "approximateArrivalTimestamp": 1700000000123,
        "subSequenceNumber": sub,
        "action": "record",
    }


def initialize(seq: str | None = "TRIM_HORIZON", sub: int | None = 0) -> dict[str, Any]:
    return {
        "action": "initialize",
        "shardId": "shardId-000000000001",
        "sequenceNumber": seq,
        "subSequenceNumber": sub,
    }


def process(*records: dict[str, Any], behind: int | None = 0) -> dict[str, Any]:
    return {"action": "processRecords", "records": list(records), "millisBehindLatest": behind}


def reply(seq: str | None = None, sub: int | None = None, error: str | None = None) -> dict[str, Any]:
    return {"action": "checkpoint", "sequenceNumber": seq, "subSequenceNumber": sub, "error": error}


def status(action: str) -> dict[str, Any]:
    return {"action": "status", "responseFor": action}


def request(seq: str | None = None, sub: int | None = None) -> dict[str, Any]:
    return {"action": "checkpoint", "sequenceNumber": seq, "subSequenceNumber": sub}


def script(*lines: dict[str, Any] | str) -> io.BytesIO:
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    return io.BytesIO(text.encode())


def drive(processor: RecordProcessor, *lines: dict[str, Any] | str) -> list[dict[str, Any]]:
    """Run ``processor`` against the scripted daemon lines; return the messages it wrote, in order."""
    stdout = io.BytesIO()
    run(processor, stdin=script(*lines), stdout=stdout)
    return [json.loads(line) for line in stdout.getvalue().splitlines() if line.strip()]


class Scripted(RecordProcessor):
    """A processor whose process_records runs a given function, and which records every call."""

    def __init__(self, on_batch: Callable[[ProcessRecordsInput], None] = lambda batch: None) -> None:
        self.on_batch = on_batch
        self.calls: list[tuple[str, object]] = []
        self.batches: list[ProcessRecordsInput] = []

    def initialize(self, shard_id: str, checkpoint: Position) -> None:
        self.calls.append(("initialize", (shard_id, checkpoint)))

    def process_records(self, batch: ProcessRecordsInput) -> None:
        self.calls.append(("process_records", len(batch.records)))
        self.batches.append(batch)
        self.on_batch(batch)

    def lease_lost(self) -> None:
        self.calls.append(("lease_lost", None))


class Minimal(RecordProcessor):
    def process_records(self, batch: ProcessRecordsInput) -> None:
        pass


# --------------------------------------------------------------------------------------------------
# values


def test_records_are_decoded_into_typed_values() -> None:
    processor = Scripted()
    binary = bytes(range(256))
    drive(
        processor,
        initialize(),
        process(record("héllo", SEQ_A, pk="été-☃"), record(binary, SEQ_B, sub=2), behind=42),
    )

    (batch,) = processor.batches
    first, second = batch.records
    assert batch.millis_behind_latest == 42
    assert first.data == "héllo".encode()
    assert first.text == "héllo"
    assert first.partition_key == "été-☃"
    assert (first.sequence_number, first.sub_sequence_number) == (SEQ_A, 0)
    assert first.arrival_millis == 1700000000123
    assert first.arrival == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert second.data == binary
    assert second.size == 256
    assert second.sub_sequence_number == 2
    with pytest.raises(UnicodeDecodeError):
        _ = second.text


def test_record_repr_never_shows_the_payload() -> None:
    secret = Record(b"credit card 4111", "pk", "1", 0, 0)
    assert "4111" not in repr(secret)
    assert "size=16" in repr(secret)


def test_initialize_gets_the_shard_and_its_checkpoint() -> None:
    processor = Scripted()
    drive(processor, initialize(SEQ_A, 3))
    drive(processor, initialize(None, None))
    assert processor.calls == [
        ("initialize", ("shardId-000000000001", Position(SEQ_A, 3))),
        ("initialize", ("shardId-000000000001", Position(None, None))),
    ]


@pytest.mark.parametrize(
    ("position", "sentinel"),
    [
        (Position("TRIM_HORIZON", 0), True),
        (Position("LATEST", 0), True),
        (Position("AT_TIMESTAMP", 0), True),
        (Position("SHARD_END", 0), True),
        (Position(None, None), True),
        (Position(SEQ_A, 0), False),
    ],
)
def test_position_knows_sentinels(position: Position, sentinel: bool) -> None:
    assert position.is_sentinel is sentinel


def test_lenient_fields_kcl1_null_sub_sequence_and_missing_millis_behind() -> None:
    processor = Scripted()
    drive(processor, {"action": "processRecords", "records": [record("x", "7", sub=None)]})
    (batch,) = processor.batches
    assert batch.millis_behind_latest is None
    assert batch.records[0].sub_sequence_number == 0


def test_lines_the_fast_parse_cannot_hold_decode_as_the_standard_library_does() -> None:
    """The fast path (orjson, records built directly) falls back to the standard library and the careful
    decoder: a numeric sequence number past 64 bits stays exact, NaN in an unused field is accepted, and
    an odd record in the middle of a batch keeps its place."""
    processor = Scripted()
    big = 10**40 + 1
    huge_sequence = {**record("b", SEQ_B), "sequenceNumber": big}
    line = json.dumps(process(record("a", SEQ_A), huge_sequence, record("c", SEQ_A, sub=None)))
    drive(processor, line[:-1] + ', "unused": NaN}')
    (batch,) = processor.batches
    assert [r.data for r in batch.records] == [b"a", b"b", b"c"]
    assert batch.records[1].sequence_number == str(big)
    assert batch.records[2].sub_sequence_number == 0
    with pytest.raises(ProtocolError, match="record 1: data is not valid base64"):
        drive(Minimal(), process(record("a", SEQ_A), {**record("b", SEQ_B), "data": "a"}))


# --------------------------------------------------------------------------------------------------
# framing and the protocol rules


def test_every_message_is_compact_json_wrapped_in_newlines() -> None:
    processor = Scripted(lambda batch: batch.checkpointer.checkpoint(batch.records[0]))
    stdout = io.BytesIO()
    run(processor, stdin=script(initialize(), process(record("a", SEQ_A)), reply(SEQ_A, 0)), stdout=stdout)
    assert stdout.getvalue() == (
        b'\n{"action":"status","responseFor":"initialize"}\n'
        b'\n{"action":"checkpoint","sequenceNumber":"' + SEQ_A.encode() + b'","subSequenceNumber":0}\n'
        b'\n{"action":"status","responseFor":"processRecords"}\n'
    )


def test_every_action_gets_its_status_and_defaults_are_sensible() -> None:
    out = drive(
        Minimal(),
        initialize(),
        process(record("a", SEQ_A)),
        {"action": "shutdownRequested"},
        {"action": "leaseLost"},
    )
    assert out == [
        status("initialize"),
        status("processRecords"),
        status("shutdownRequested"),
        status("leaseLost"),
    ]


def test_default_shard_ended_checkpoints_the_end_of_the_shard() -> None:
    out = drive(Minimal(), {"action": "shardEnded"}, reply())
    assert out == [request(), status("shardEnded")]


def test_default_shard_ended_survives_a_refused_checkpoint(caplog: pytest.LogCaptureFixture) -> None:
    out = drive(Minimal(), {"action": "shardEnded"}, reply(error="ShutdownException"))
    assert out == [request(), status("shardEnded")]
    assert "ShutdownException" in caplog.text


def test_blank_lines_noise_unknown_actions_and_stray_replies_are_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    processor = Scripted()
    out = drive(
        processor,
        "",
        "   ",
        initialize(),
        "this is not json",
        {"action": "bogusAction"},
        "[1,2,3]",  # JSON that is not an object
        reply(SEQ_A, 0),
        process(record("a", SEQ_A)),
    )
    assert out == [status("initialize"), status("processRecords")]
    assert [name for name, _ in processor.calls] == ["initialize", "process_records"]
    assert "bogusAction" in caplog.text
    assert "not JSON" in caplog.text
    assert "answers no request" in caplog.text


def test_a_handler_that_raises_is_logged_and_still_answered(caplog: pytest.LogCaptureFixture) -> None:
    def boom(batch: ProcessRecordsInput) -> None:
        raise ValueError("bad record")

    out = drive(Scripted(boom), process(record("a", SEQ_A)), process(record("b", SEQ_B)))
    assert out == [status("processRecords"), status("processRecords")]
    assert "ValueError: bad record" in caplog.text  # the traceback
    assert "processRecords raised" in caplog.text


def test_print_in_a_handler_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    def chatty(batch: ProcessRecordsInput) -> None:
        print("hello from the handler")

    stdout = io.BytesIO()
    run(Scripted(chatty), stdin=script(process(record("a", SEQ_A))), stdout=stdout)
    assert b"hello" not in stdout.getvalue()
    captured = capsys.readouterr()
    assert "hello from the handler" in captured.err
    assert "hello" not in captured.out


def test_sys_stdout_is_restored_after_a_handler() -> None:
    saved = sys.stdout
    drive(Scripted(lambda batch: print("x")), process(record("a", SEQ_A)))
    assert sys.stdout is saved


def test_end_of_input_returns_without_output() -> None:
    assert drive(Minimal()) == []


def test_malformed_known_action_raises_protocol_error() -> None:
    broken = record("a", SEQ_A)
    del broken["data"]
    with pytest.raises(ProtocolError, match="record 0: data"):
        drive(Minimal(), process(broken))
    with pytest.raises(ProtocolError, match="approximateArrivalTimestamp"):
        drive(Minimal(), process({**record("a", SEQ_A), "approximateArrivalTimestamp": None}))
    with pytest.raises(ProtocolError, match="shardId"):
        drive(Minimal(), {"action": "initialize"})


def test_legacy_kcl1_shutdown_maps_to_shard_ended_and_lease_lost() -> None:
    processor = Scripted()
    out = drive(processor, {"action": "shutdown", "reason": "TERMINATE"}, reply())
    assert out == [request(), status("shutdown")]
    out = drive(processor, {"action": "shutdown", "reason": "ZOMBIE"})
    assert out == [status("shutdown")]
    assert processor.calls == [("lease_lost", None)]


# --------------------------------------------------------------------------------------------------
# checkpointing


def test_the_three_ways_to_checkpoint() -> None:
    def checkpoint_three_ways(batch: ProcessRecordsInput) -> None:
        batch.checkpointer.checkpoint()
        batch.checkpointer.checkpoint(batch.records[1])
        batch.checkpointer.checkpoint(SEQ_A, 2)
        batch.checkpointer.checkpoint(SEQ_A)

    out = drive(
        Scripted(checkpoint_three_ways),
        process(record("a", SEQ_A), record("b", SEQ_B, sub=5)),
        reply(),
        reply(SEQ_B, 5),
        reply(SEQ_A, 2),
        reply(SEQ_A),
    )
    assert out == [request(), request(SEQ_B, 5), request(SEQ_A, 2), request(SEQ_A), status("processRecords")]


def test_checkpoint_argument_mistakes_are_type_errors() -> None:
    errors: list[Exception] = []

    def misuse(batch: ProcessRecordsInput) -> None:
        for call in (
            lambda: batch.checkpointer.checkpoint(batch.records[0], 1),  # type: ignore[call-overload]
            lambda: batch.checkpointer.checkpoint(None, 1),  # type: ignore[call-overload]
            lambda: batch.checkpointer.checkpoint(retries=-1),
        ):
            try:
                call()
            except (TypeError, ValueError) as exc:
                errors.append(exc)

    assert drive(Scripted(misuse), process(record("a", SEQ_A))) == [status("processRecords")]
    assert [type(e) for e in errors] == [TypeError, TypeError, ValueError]


@pytest.mark.parametrize(
    ("name", "retriable"),
    [
        ("ThrottlingException", True),
        ("KinesisClientLibDependencyException", True),
        ("ShutdownException", False),
        ("InvalidStateException", False),
        ("IllegalArgumentException", False),
        ("NullPointerException", False),
    ],
)
def test_checkpoint_error_carries_the_java_name(name: str, retriable: bool) -> None:
    caught: list[CheckpointError] = []

    def checkpoint(batch: ProcessRecordsInput) -> None:
        try:
            batch.checkpointer.checkpoint(batch.records[0])
        except CheckpointError as exc:
            caught.append(exc)

    drive(Scripted(checkpoint), process(record("a", SEQ_A, sub=1)), reply(SEQ_A, 1, name))
    (error,) = caught
    assert error.name == name
    assert error.retriable is retriable
    assert (error.name in RETRIABLE_ERRORS) is retriable
    assert (error.sequence_number, error.sub_sequence_number) == (SEQ_A, 1)
    assert str(error) == f"{name} while checkpointing at {SEQ_A}/1"


def test_retries_retry_only_retriable_errors_with_doubling_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr("kcl_client._checkpointer.time.sleep", sleeps.append)
    outcomes: list[str] = []

    def checkpoint(batch: ProcessRecordsInput) -> None:
        for _ in range(3):
            try:
                batch.checkpointer.checkpoint(retries=3, backoff_s=0.5)
                outcomes.append("ok")
            except CheckpointError as exc:
                outcomes.append(exc.name)

    out = drive(
        Scripted(checkpoint),
        process(record("a", SEQ_A)),
        # 1st call: throttled twice, then succeeds
        reply(error="ThrottlingException"),
        reply(error="KinesisClientLibDependencyException"),
        reply(),
        # 2nd call: not retriable, raised at once
        reply(error="ShutdownException"),
        # 3rd call: throttled 4 times: 1 try + 3 retries, then raised
        *[reply(error="ThrottlingException")] * 4,
    )
    assert outcomes == ["ok", "ShutdownException", "ThrottlingException"]
    assert out == [request()] * 8 + [status("processRecords")]
    assert sleeps == [0.5, 1.0, 0.5, 1.0, 2.0]


def test_a_checkpointer_expires_when_its_call_returns() -> None:
    processor = Scripted()
    drive(processor, process(record("a", SEQ_A)))
    with pytest.raises(RuntimeError, match="has returned"):
        processor.batches[0].checkpointer.checkpoint()


def test_a_non_checkpoint_reply_is_invalid_state(caplog: pytest.LogCaptureFixture) -> None:
    caught: list[str] = []

    def checkpoint(batch: ProcessRecordsInput) -> None:
        try:
            batch.checkpointer.checkpoint()
        except CheckpointError as exc:
            caught.append(exc.name)

    out = drive(Scripted(checkpoint), process(record("a", SEQ_A)), {"action": "leaseLost"})
    assert caught == ["InvalidStateException"]
    assert out == [request(), status("processRecords")]
    assert "expected the reply to a checkpoint request" in caplog.text


def test_blank_lines_before_a_checkpoint_reply_are_skipped() -> None:
    processor = Scripted(lambda batch: batch.checkpointer.checkpoint())
    out = drive(processor, process(record("a", SEQ_A)), "", reply())
    assert out == [request(), status("processRecords")]


def test_eof_while_waiting_for_a_reply_ends_quietly(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[BaseException] = []

    def checkpoint(batch: ProcessRecordsInput) -> None:
        try:
            batch.checkpointer.checkpoint()
        except EOFError as exc:
            seen.append(exc)
            raise

    out = drive(Scripted(checkpoint), process(record("a", SEQ_A)))
    assert out == [request()]  # no status: the daemon has gone
    assert len(seen) == 1
    assert "Traceback" not in caplog.text


def test_checkpoints_from_worker_threads_inside_a_handler_are_serialized() -> None:
    results: list[str | None] = []

    def fan_out(batch: ProcessRecordsInput) -> None:
        def work(rec: Record) -> None:
            batch.checkpointer.checkpoint(rec)
            results.append(rec.sequence_number)

        threads = [threading.Thread(target=work, args=(rec,)) for rec in batch.records]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    records = [record(str(i), str(i)) for i in range(1, 9)]
    out = drive(Scripted(fan_out), process(*records), *[reply() for _ in records])
    assert sorted(results, key=lambda s: int(s or 0)) == [str(i) for i in range(1, 9)]
    assert out[-1] == status("processRecords")
    assert len(out) == 9


# --------------------------------------------------------------------------------------------------
# real pipes and a real child process


def test_a_line_over_10_mb_through_a_real_pipe() -> None:
    payload = b"\xab" * (100 * 1024)
    records = [record(payload, str(1000 + i)) for i in range(110)]
    lines = [initialize(), process(*records), reply("1109", 0)]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    assert len(data) > 10 * 1024 * 1024

    read_fd, write_fd = os.pipe()

    def feed() -> None:
        with os.fdopen(write_fd, "wb") as writer:
            writer.write(data)

    feeder = threading.Thread(target=feed)
    feeder.start()
    processor = Scripted(lambda batch: batch.checkpointer.checkpoint(batch.records[-1]))
    stdout = io.BytesIO()
    with os.fdopen(read_fd, "rb") as reader:
        run(processor, stdin=reader, stdout=stdout)
    feeder.join()

    out = [json.loads(line) for line in stdout.getvalue().splitlines() if line.strip()]
    assert out == [status("initialize"), request("1109", 0), status("processRecords")]
    assert processor.batches[0].records[-1].data == payload


CHILD = textwrap.dedent(
    """
    import os, sys
    from kcl_client import RecordProcessor, run

    print("printed before run() is noise on stdout")

    class Chatty(RecordProcessor):
        def process_records(self, batch):
            print("print() inside a handler")
            sys.stdout.flush()
            os.write(1, b"raw write to fd 1\\n")
            os.system("echo from a subprocess")
            batch.checkpointer.checkpoint()

    run(Chatty())
    print("printed after run() is back on stdout")
    """
)


def test_a_real_child_keeps_user_output_off_the_protocol() -> None:
    daemon = [initialize(), process(record("a", SEQ_A)), reply()]
    result = subprocess.run(
        [sys.executable, "-c", CHILD],
        input="".join(json.dumps(m) + "\n" for m in daemon).encode(),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    protocol = [json.loads(line) for line in lines if line.startswith("{")]
    noise = [line for line in lines if line.strip() and not line.startswith("{")]
    assert protocol == [status("initialize"), request(), status("processRecords")]
    assert noise == ["printed before run() is noise on stdout", "printed after run() is back on stdout"]
    for text in ("print() inside a handler", "raw write to fd 1", "from a subprocess"):
        assert text in result.stderr.decode()


def test_conformance_processor_module_runs_as_a_script() -> None:
    daemon = [initialize(), process(record("checkpoint-batch", SEQ_A)), reply(), {"action": "leaseLost"}]
    result = subprocess.run(
        [sys.executable, str(REPO / "clients" / "python" / "conformance.py")],
        input="".join(json.dumps(m) + "\n" for m in daemon).encode(),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0
    protocol = [json.loads(line) for line in result.stdout.decode().splitlines() if line.strip()]
    assert protocol == [status("initialize"), request(), status("processRecords"), status("leaseLost")]


def test_library_logs_under_kcl_client(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kcl_client"):
        drive(Minimal(), {"action": "bogus"})
    assert [r.name for r in caplog.records] == ["kcl_client"]


def test_checkpointer_is_exported_for_type_hints() -> None:
    processor = Scripted()
    drive(processor, process())
    assert isinstance(processor.batches[0].checkpointer, Checkpointer)
    assert processor.batches[0].records == ()


# --------------------------------------------------------------------------------------------------
# lanes: several shards in one process (protocol README, section 11)


def lane(number: int, message: dict[str, Any]) -> dict[str, Any]:
    return {"lane": number, **message}


class Checkpointing(RecordProcessor):
    made: ClassVar[list[Checkpointing]] = []

    def __init__(self) -> None:
        self.shard = "?"
        self.data: list[bytes] = []
        Checkpointing.made.append(self)

    def initialize(self, shard_id: str, checkpoint: Position) -> None:
        self.shard = shard_id

    def process_records(self, batch: ProcessRecordsInput) -> None:
        self.data += [r.data for r in batch.records]
        batch.checkpointer.checkpoint(batch.records[-1])


def test_a_factory_takes_the_offer_of_lanes_and_serves_each_lane_with_its_own_processor() -> None:
    Checkpointing.made = []
    offer = {**initialize(), "lanes": 4}
    second = {**initialize(), "shardId": "shardId-000000000002"}
    written = drive(
        Checkpointing,  # type: ignore[arg-type]  # drive's hint names an instance; run takes either
        offer,
        lane(1, second),
        lane(0, process(record("a", SEQ_A))),
        lane(1, process(record("b", SEQ_B))),
        lane(1, reply(SEQ_B, 0)),
        lane(0, reply(SEQ_A, 0)),
        lane(1, {"action": "leaseLost"}),
        {"action": "close", "lane": 1},
        "not a lane line",
    )
    assert written[0] == {"action": "lanes"}
    by_lane: dict[int, list[dict[str, Any]]] = {}
    for message in written[1:]:
        by_lane.setdefault(message.pop("lane"), []).append(message)
    assert by_lane[0] == [status("initialize"), request(SEQ_A, 0), status("processRecords")]
    assert by_lane[1] == [
        status("initialize"),
        request(SEQ_B, 0),
        status("processRecords"),
        status("leaseLost"),
    ]
    assert sorted((p.shard, p.data) for p in Checkpointing.made) == [
        ("shardId-000000000001", [b"a"]),
        ("shardId-000000000002", [b"b"]),
    ]


def test_a_factory_without_an_offer_and_an_instance_with_one_serve_one_shard() -> None:
    written = drive(Scripted, initialize(), process(record("a", SEQ_A)))  # type: ignore[arg-type]
    assert written == [status("initialize"), status("processRecords")]
    written = drive(Scripted(), {**initialize(), "lanes": 4}, process(record("a", SEQ_A)))
    assert written == [status("initialize"), status("processRecords")]
