"""Load golden transcripts and replay them against a real client process over pipes.

The replay plays the daemon side with ``pexpect.popen_spawn.PopenSpawn`` (pipes, never a pty: a pty would
echo our input and mix stderr into stdout). ``PopenSpawn`` sends the child's stderr to the same pipe as
stdout; the replay skips every line that is not a protocol message, exactly as the daemon does.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pexpect
from pexpect.popen_spawn import PopenSpawn

from kcl_protocol import (
    ChannelMessage,
    CheckpointRequest,
    DeadLetterRequest,
    LogLine,
    MetricLine,
    NoiseLine,
    Status,
    decode_child_line,
)
from kcl_protocol.extensions import encode_channel, encode_dead_letter
from tests.support.paths import REPO

TRANSCRIPT_DIR = REPO / "protocol" / "transcripts"
READ_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Transcript:
    name: str
    about: str
    entries: tuple[dict[str, Any], ...]


def load(path: Path) -> Transcript:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    header, *entries = lines
    return Transcript(header["transcript"], header["about"], tuple(entries))


def all_transcripts() -> list[Transcript]:
    return [load(p) for p in sorted(TRANSCRIPT_DIR.glob("*.jsonl"))]


def offers_lanes(transcript: Transcript) -> bool:
    """Whether the daemon offers lanes (``shardsPerChild``, protocol README section 11) in ``transcript``."""
    return any("lanes" in entry.get("daemon", {}) for entry in transcript.entries)


def takes_lanes(transcript: Transcript) -> bool:
    """Whether the child takes the offer of lanes in ``transcript``."""
    return any(entry.get("child", {}).get("action") == "lanes" for entry in transcript.entries)


def client_transcripts(*, lanes: bool = False) -> list[Transcript]:
    """Transcripts a client replays: all but the daemon-side-only ones (with ``child_raw`` entries, which
    no conformance processor can produce); ``child_noise`` entries are skipped by the replay.

    ``lanes``: the client's conformance processor takes an offer of lanes (our Python, Node and Go clients,
    given a processor factory), so it replays ``lanes`` and not ``lanes_offered``, where the offer is
    declined; the others (amazon_kclpy, aws-kcl, the shell client) the other way round."""
    return [
        t
        for t in all_transcripts()
        if not any("child_raw" in entry for entry in t.entries)
        and (not offers_lanes(t) or takes_lanes(t) == lanes)
    ]


def normalize_child(message: dict[str, Any]) -> dict[str, Any]:
    """A child message as compared: checkpoint requests always have both keys, never ``error``; a lane, if
    any, stays."""
    lane = {"lane": message["lane"]} if "lane" in message else {}
    if message.get("action") == "metric":
        return {**message, "value": float(message["value"]), "dimensions": message.get("dimensions") or {}}
    if message.get("action") == "checkpoint":
        return {
            **lane,
            "action": "checkpoint",
            "sequenceNumber": message.get("sequenceNumber"),
            "subSequenceNumber": message.get("subSequenceNumber"),
        }
    return message


def _as_dict(message: Status | CheckpointRequest | ChannelMessage | DeadLetterRequest) -> dict[str, Any]:
    if isinstance(message, LogLine | MetricLine):
        return encode_channel(message)
    if isinstance(message, DeadLetterRequest):
        return encode_dead_letter(message)
    if isinstance(message, Status):
        return {"action": "status", "responseFor": message.response_for}
    return {
        "action": "checkpoint",
        "sequenceNumber": message.sequence_number,
        "subSequenceNumber": message.sub_sequence_number,
    }


def _next_protocol_message(child: PopenSpawn, skipped: list[str]) -> dict[str, Any]:
    while True:
        line = child.readline()
        if line == b"":
            raise AssertionError(f"child closed stdout early; skipped output: {skipped[-20:]!r}")
        # the lanes extension as the daemon reads it (kcl_daemon/process/lanes.py): the accepting line, and
        # a lane on any line, which the codec of one conversation does not see
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and obj.get("action") == "lanes":
            return {"action": "lanes"}
        lane = {"lane": obj["lane"]} if isinstance(obj, dict) and "lane" in obj else {}
        decoded = decode_child_line(line)
        if isinstance(decoded, NoiseLine):
            if not decoded.is_blank:
                skipped.append(decoded.preview)
            continue
        return normalize_child({**lane, **_as_dict(decoded)})


def replay(
    transcript: Transcript,
    command: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
) -> None:
    """Play the daemon side of ``transcript`` against ``command``; raise AssertionError on any mismatch."""
    child = PopenSpawn(list(command), cwd=cwd, env=env, timeout=READ_TIMEOUT_S)
    skipped: list[str] = []
    try:
        for index, entry in enumerate(transcript.entries, start=2):
            where = f"{transcript.name}.jsonl line {index}"
            if "daemon" in entry:
                child.send(json.dumps(entry["daemon"], separators=(",", ":"), ensure_ascii=False) + "\n")
            elif "child" in entry:
                try:
                    got = _next_protocol_message(child, skipped)
                except pexpect.TIMEOUT:
                    raise AssertionError(
                        f"{where}: no reply within {READ_TIMEOUT_S}s; skipped {skipped!r}"
                    ) from None
                expected = normalize_child(entry["child"])
                assert got == expected, f"{where}: expected {expected}, child wrote {got}"
            elif entry.get("eof"):
                child.sendeof()
                child.expect(pexpect.EOF, timeout=READ_TIMEOUT_S)
                child.wait()
                assert child.exitstatus == 0, f"{where}: child exited {child.exitstatus}; output {skipped!r}"
            # child_noise entries are for the daemon-side replay only
    finally:
        if child.proc.poll() is None:
            child.kill(9)
            child.wait()
        # PopenSpawn has no close(): close the pipes ourselves (unclosed files are test errors here).
        for pipe in (child.proc.stdin, child.proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


def large_batch(total_bytes: int = 10 * 1024 * 1024, record_bytes: int = 100 * 1024) -> Transcript:
    """A generated transcript whose processRecords line is over ``total_bytes`` (clients' line buffers)."""
    import base64

    count = total_bytes // record_bytes + 1
    payload = base64.b64encode(b"\xab" * record_bytes).decode()
    records = [
        {
            "data": payload,
            "partitionKey": f"pk-{i}",
            "sequenceNumber": str(1000 + i),
            "approximateArrivalTimestamp": 1700000000000 + i,
            "subSequenceNumber": 0,
            "action": "record",
        }
        for i in range(count)
    ]
    last = records[-1]
    records[-1] = {**last, "data": base64.b64encode(b"checkpoint").decode()}
    entries = (
        {
            "daemon": {
                "action": "initialize",
                "shardId": "shardId-000000000000",
                "sequenceNumber": "TRIM_HORIZON",
                "subSequenceNumber": 0,
            }
        },
        {"child": {"action": "status", "responseFor": "initialize"}},
        {"daemon": {"action": "processRecords", "records": records, "millisBehindLatest": 0}},
        {"child": {"action": "checkpoint", "sequenceNumber": last["sequenceNumber"], "subSequenceNumber": 0}},
        {
            "daemon": {
                "action": "checkpoint",
                "sequenceNumber": last["sequenceNumber"],
                "subSequenceNumber": 0,
                "error": None,
            }
        },
        {"child": {"action": "status", "responseFor": "processRecords"}},
        {"eof": True},
    )
    return Transcript("large_batch", f"one processRecords line of more than {total_bytes} bytes", entries)
