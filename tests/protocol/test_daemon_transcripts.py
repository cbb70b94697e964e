"""The daemon's side of every golden transcript: codec, conversation and session, byte for byte.

A scripted child plays the transcript's child lines (noise included) and exits non-zero if any line the
daemon writes differs from the transcript. The daemon is driven with the transcript's actions, and its
checkpoint handler answers with the transcript's replies.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable

import pytest

from kcl_daemon.process.child import ChildProcess
from kcl_daemon.process.lanes import Lane, LanePool
from kcl_daemon.process.session import ActionTimeouts, ChildSession
from kcl_protocol import (
    ACTION_MESSAGES,
    CheckpointReply,
    CheckpointRequest,
    DeadLetterRequest,
    decode_child_line,
    decode_daemon_line,
)
from kcl_protocol.extensions import encode_dead_letter
from tests.support.paths import CHILDREN
from tests.support.transcripts import TRANSCRIPT_DIR, Transcript, all_transcripts, offers_lanes

CHILD = CHILDREN / "transcript_child.py"


def _encode(message: dict[str, object]) -> bytes:

    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize(
    "transcript", [t for t in all_transcripts() if not offers_lanes(t)], ids=lambda t: t.name
)
async def test_daemon_side(transcript: Transcript) -> None:
    actions = []
    replies: list[CheckpointReply] = []
    answered_by_the_session = False  # a malformed request: the session replies, not the handler
    for entry in transcript.entries:
        if "child_raw" in entry:
            raw = decode_child_line(entry["child_raw"].encode())
            answered_by_the_session = isinstance(raw, CheckpointRequest) and raw.malformed is not None
        elif "daemon" in entry:
            message = decode_daemon_line(_encode(entry["daemon"]))
            if isinstance(message, CheckpointReply):
                if not answered_by_the_session:
                    replies.append(message)
                answered_by_the_session = False
            else:
                assert type(message) in ACTION_MESSAGES.values()
                actions.append(message)

    async def answer(request: CheckpointRequest) -> str | None:
        reply = replies.pop(0)
        assert (request.sequence_number, request.sub_sequence_number) == (
            reply.sequence_number,
            reply.sub_sequence_number,
        )
        return reply.error

    child = await ChildProcess.spawn(
        (sys.executable, str(CHILD), str(TRANSCRIPT_DIR / f"{transcript.name}.jsonl")),
        line_limit_bytes=1 << 20,
    )
    dead_letters: list[DeadLetterRequest] = []

    async def dead_letter(request: DeadLetterRequest) -> None:
        dead_letters.append(request)

    session = ChildSession(child, ActionTimeouts(default_s=10), on_dead_letter=dead_letter)
    for action in actions:
        # leaseLost/initialize have no checkpointer; none of the transcripts checkpoints during them
        await session.run_action(action, answer)
    assert replies == []
    assert await child.stop() == 0, list(child.stderr_tail)
    if transcript.name == "noise":
        assert session.noise_lines == 5
    if transcript.name == "channel":
        assert session.channel_lines == 2
    expected = [
        entry["child"] for entry in transcript.entries if entry.get("child", {}).get("action") == "deadLetter"
    ]
    assert [encode_dead_letter(request) for request in dead_letters] == expected


@pytest.mark.parametrize(
    "transcript", [t for t in all_transcripts() if offers_lanes(t)], ids=lambda t: t.name
)
async def test_daemon_side_of_lanes(transcript: Transcript) -> None:
    """The lanes transcripts through the daemon's own lane pool (``shardsPerChild = 4``): each lane a
    ChildSession, each daemon line triggered in the transcript's order and compared byte for byte as the
    daemon writes it (the scripted child compares them too)."""
    written: list[bytes] = []
    wrote = asyncio.Event()

    async def spawn() -> ChildProcess:
        child = await ChildProcess.spawn(
            (sys.executable, str(CHILD), str(TRANSCRIPT_DIR / f"{transcript.name}.jsonl")),
            line_limit_bytes=1 << 20,
        )
        write = child.write

        async def recorded(data: bytes, timeout_s: float | None) -> None:
            await write(data, timeout_s)
            written.append(data)
            wrote.set()

        child.write = recorded  # type: ignore[method-assign]
        return child

    async def written_up_to(count: int) -> None:
        async with asyncio.timeout(10):
            while len(written) < count:
                wrote.clear()
                await wrote.wait()

    pool = LanePool(spawn, 4)
    lanes: dict[int, Lane | ChildProcess] = {}
    sessions: dict[int, ChildSession] = {}
    actions: dict[int, asyncio.Task[None]] = {}
    replies: dict[int, asyncio.Queue[CheckpointReply]] = {}
    expected: list[bytes] = []
    code: int | None = None

    def answerer(number: int) -> Callable[[CheckpointRequest], Awaitable[str | None]]:
        async def answer(request: CheckpointRequest) -> str | None:
            reply = await replies[number].get()
            assert (request.sequence_number, request.sub_sequence_number) == (
                reply.sequence_number,
                reply.sub_sequence_number,
            )
            return reply.error

        return answer

    for entry in transcript.entries:
        if "daemon" not in entry:
            continue
        obj = dict(entry["daemon"])
        expected.append(_encode(obj) + b"\n")
        number = obj.pop("lane", 0)
        obj.pop("lanes", None)
        if obj["action"] == "close":
            await actions[number]
            code = await lanes.pop(number).stop()
        elif obj["action"] == "checkpoint":
            reply = decode_daemon_line(_encode(obj))
            assert isinstance(reply, CheckpointReply)
            replies[number].put_nowait(reply)
        else:
            if number not in lanes:
                lanes[number] = await pool()
                assert getattr(lanes[number], "number", 0) == number
                sessions[number] = ChildSession(lanes[number], ActionTimeouts(default_s=10))  # type: ignore[arg-type]
                replies[number] = asyncio.Queue()
            else:
                await actions[number]  # the lane's previous action is answered before its next one
            message = decode_daemon_line(_encode(obj))
            actions[number] = asyncio.create_task(sessions[number].run_action(message, answerer(number)))  # type: ignore[arg-type]
        await written_up_to(len(expected))
        assert written == expected
    for number, lane in lanes.items():  # a declined offer: the one plain child ends with its shard
        await actions[number]
        code = await lane.stop()
    assert code == 0
