"""Replay the golden transcripts against the Python clients: kcl_client and the real amazon_kclpy.

Each processor runs as its own child process over pipes (see ``transcripts.replay``):

* ``clients/python/conformance.py``: our client's conformance processor;
* ``tests/fixtures/kclpy_conformance_v{1,2,3}.py``: the same behaviour on amazon_kclpy's three processor
  interfaces, run by ``amazon_kclpy.kcl.KCLProcess``;
* amazon_kclpy's own, unmodified sample (``samples/sample_kclpy_app.py``).
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES, REPO
from tests.support.requirements import require_path
from tests.support.transcripts import Transcript, client_transcripts, large_batch, replay

pytestmark = pytest.mark.clients

TRANSCRIPTS = {t.name: t for t in [*client_transcripts(), *client_transcripts(lanes=True)]}
#: the processors that take an offer of lanes (kcl_client given its processor class); amazon_kclpy declines
TAKES_LANES = {"kcl_client"}

PROCESSORS: dict[str, list[str]] = {
    "kcl_client": [sys.executable, str(REPO / "clients" / "python" / "conformance.py")],
    "kclpy_v1": [sys.executable, str(FIXTURES / "kclpy_conformance_v1.py")],
    "kclpy_v2": [sys.executable, str(FIXTURES / "kclpy_conformance_v2.py")],
    "kclpy_v3": [sys.executable, str(FIXTURES / "kclpy_conformance_v3.py")],
}

# (processor, transcript) pairs a real-client limitation makes impossible, with the reason; each becomes a
# strict xfail. Only the channel with amazon_kclpy 3.2.0: its v1 and v2 adapters turn leaseLost into
# shutdown("ZOMBIE") and shardEnded into shutdown("TERMINATE") with the real checkpointer, and pass
# shutdownRequested through with its checkpointer (v1: as a bare argument), so every transcript is reachable.
# amazon_kclpy has no API for kcl-daemon's log/metric channel; `channel_offered` shows it ignores the offer.
KNOWN_LIMITATIONS: dict[tuple[str, str], str] = {
    (processor, transcript): f"amazon_kclpy cannot write the channel's {what}"
    for processor in ("kclpy_v1", "kclpy_v2", "kclpy_v3")
    for transcript, what in (("channel", "log/metric lines"), ("dead_letter", "deadLetter line"))
}


def _cases() -> list[object]:
    cases: list[object] = []
    for processor in PROCESSORS:
        for name in (t.name for t in client_transcripts(lanes=processor in TAKES_LANES)):
            reason = KNOWN_LIMITATIONS.get((processor, name))
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            cases.append(pytest.param(processor, name, marks=marks, id=f"{processor}-{name}"))
    return cases


@pytest.mark.parametrize(("processor", "transcript"), _cases())
def test_transcript(processor: str, transcript: str) -> None:
    replay(TRANSCRIPTS[transcript], PROCESSORS[processor], cwd=REPO)


@pytest.mark.parametrize("processor", ["kcl_client", "kclpy_v3"])
def test_large_batch(processor: str) -> None:
    replay(large_batch(), PROCESSORS[processor], cwd=REPO)


# --------------------------------------------------------------------------------------------------
# amazon_kclpy's own sample, unmodified


def _kclpy_sample() -> list[str]:
    import amazon_kclpy

    path = Path(amazon_kclpy.__file__).resolve().parents[1] / "samples" / "sample_kclpy_app.py"
    return [sys.executable, str(require_path(path, "amazon_kclpy's sample_kclpy_app.py"))]


def test_kclpy_sample_on_happy() -> None:
    # The sample checkpoints its first batch at the batch's largest record, and shard end with null:
    # in `happy` that is exactly the conformance behaviour.
    replay(TRANSCRIPTS["happy"], _kclpy_sample(), cwd=REPO)


def _record(seq: str, sub: int, text: str) -> dict[str, object]:
    return {
        "data": base64.b64encode(text.encode()).decode(),
        "partitionKey": "pk",
        "sequenceNumber": seq,
        "approximateArrivalTimestamp": 1700000000123,
        "subSequenceNumber": sub,
        "action": "record",
    }


def _daemon(action: str, **fields: object) -> dict[str, object]:
    return {"daemon": {"action": action, **fields}}


def _child(action: str, **fields: object) -> dict[str, object]:
    return {"child": {"action": action, **fields}}


_INITIALIZE = _daemon(
    "initialize", shardId="shardId-000000000001", sequenceNumber="TRIM_HORIZON", subSequenceNumber=0
)
_EOF = {"eof": True}


def _batch(*records: dict[str, object]) -> dict[str, object]:
    return _daemon("processRecords", records=list(records), millisBehindLatest=0)


def _status(action: str) -> dict[str, object]:
    return _child("status", responseFor=action)


def _request(seq: str | None = None, sub: int | None = None) -> dict[str, object]:
    return _child("checkpoint", sequenceNumber=seq, subSequenceNumber=sub)


def _reply(seq: str | None = None, sub: int | None = None, error: str | None = None) -> dict[str, object]:
    return _daemon("checkpoint", sequenceNumber=seq, subSequenceNumber=sub, error=error)


def test_kclpy_sample_checkpoints_by_time_not_by_content() -> None:
    """What the sample really does: it ignores payloads, checkpoints the first batch at its largest
    (sequence, sub-sequence) compared as integers, then at most every 30 s; shutdownRequested
    checkpoints with null, leaseLost does nothing. So it only matches transcripts by coincidence."""
    entries = (
        _INITIALIZE,
        _status("initialize"),
        _batch(_record("99", 0, "a"), _record("250", 0, "b"), _record("250", 1, "c")),
        _request("250", 1),
        _reply("250", 1),
        _status("processRecords"),
        # Within 30 s of the last checkpoint: no checkpoint, even for a "checkpoint" payload.
        _batch(_record("300", 0, "checkpoint")),
        _status("processRecords"),
        _daemon("shutdownRequested"),
        _request(),
        _reply(),
        _status("shutdownRequested"),
        _daemon("leaseLost"),
        _status("leaseLost"),
        _EOF,
    )
    transcript = Transcript("kclpy_sample", "the unmodified amazon_kclpy sample's checkpoint policy", entries)
    replay(transcript, _kclpy_sample(), cwd=REPO)


# --------------------------------------------------------------------------------------------------
# our sample (samples/python/sample_processor.py)


def test_our_sample_checkpoints_at_shard_end_retrying_throttling() -> None:
    """The sample does not checkpoint a batch within 10 s of starting, checkpoints the end of the shard,
    and retries a throttled checkpoint after its 1 s backoff."""
    entries = (
        _INITIALIZE,
        _status("initialize"),
        _batch(_record("1", 0, "checkpoint")),
        _status("processRecords"),
        _daemon("shardEnded"),
        _request(),
        _reply(error="ThrottlingException"),
        _request(),
        _reply(),
        _status("shardEnded"),
        _EOF,
    )
    transcript = Transcript("sample_processor", "samples/python/sample_processor.py at shard end", entries)
    replay(transcript, [sys.executable, "sample_processor.py"], cwd=REPO / "samples" / "python")
