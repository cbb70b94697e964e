"""The daemon side of lanes (shardsPerChild) against small real child processes: a child that takes the
offer gets the next shards as lanes, one that declines turns the pool to plain children, and a child that
dies ends every lane on it."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable

import orjson
import pytest

from kcl_daemon.errors import ChildExited, ChildTimeout
from kcl_daemon.process.child import ChildProcess
from kcl_daemon.process.lanes import Lane, LanePool
from kcl_protocol import Initialize, ShardEnded, encode_daemon_message

#: answers every action but shardEnded with its status; takes the offer of lanes when argv[1] == "take"
CHILD = r"""
import json, sys
take = sys.argv[1] == "take"
for line in sys.stdin:
    message = json.loads(line)
    if message.get("action") in ("close", "shardEnded"):  # shardEnded: a handler that never returns
        continue
    out = {"action": "status", "responseFor": message["action"]}
    if "lanes" in message and take:
        sys.stdout.write('{"action":"lanes"}\n')
        out["lane"] = 0
    elif "lane" in message:
        out["lane"] = message["lane"]
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"""


def spawner(mode: str) -> Callable[[], Awaitable[ChildProcess]]:
    async def spawn() -> ChildProcess:
        return await ChildProcess.spawn([sys.executable, "-c", CHILD, mode], line_limit_bytes=1 << 20)

    return spawn


async def initialize(child: ChildProcess | Lane, shard: str) -> dict[str, object]:
    await child.write(encode_daemon_message(Initialize(shard, "TRIM_HORIZON", 0)), 5.0)
    reply = orjson.loads(await child.read_line(10.0, "initialize"))
    assert isinstance(reply, dict)
    return reply


async def test_a_child_that_takes_the_offer_serves_the_next_shards_in_lanes() -> None:
    pool = LanePool(spawner("take"), 2)
    first = await pool()
    waiting = asyncio.create_task(pool())  # waits for the first child's answer, then takes a lane
    assert await initialize(first, "shardId-0") == {
        "action": "status",
        "responseFor": "initialize",
        "lane": 0,
    }
    second = await waiting
    assert isinstance(second, Lane) and second.pid == first.pid and second.number == 1
    assert await initialize(second, "shardId-1") == {
        "action": "status",
        "responseFor": "initialize",
        "lane": 1,
    }
    third = await pool()  # two lanes at most: a new child
    assert third.pid != first.pid
    await initialize(third, "shardId-2")
    assert await second.stop() is None  # only the lane closes
    assert first.returncode is None
    assert await first.stop() == 0  # the child's last lane: the child stops
    assert await third.stop() == 0


async def test_a_child_that_declines_turns_the_pool_to_one_plain_child_per_shard() -> None:
    pool = LanePool(spawner("decline"), 4)
    first = await pool()
    waiting = asyncio.create_task(pool())
    assert await initialize(first, "shardId-0") == {"action": "status", "responseFor": "initialize"}
    second = await waiting
    assert pool.capable is False
    assert not isinstance(second, Lane) and second.pid != first.pid
    assert await initialize(second, "shardId-1") == {"action": "status", "responseFor": "initialize"}
    assert await first.stop() == 0 and await second.stop() == 0


async def test_a_child_that_dies_ends_every_lane_on_it() -> None:
    pool = LanePool(spawner("take"), 4)
    first = await pool()
    waiting = asyncio.create_task(pool())
    await initialize(first, "shardId-0")
    second = await waiting
    await initialize(second, "shardId-1")
    assert isinstance(first, Lane)
    first._shared.child._signal_group(signal.SIGKILL)
    for lane in (first, second):
        with pytest.raises(ChildExited):
            await lane.read_line(10.0, "processRecords")
    await first.stop()
    await second.stop()
    replacement = await pool()  # the dead child is not handed out again
    assert replacement.pid != first.pid
    await initialize(replacement, "shardId-0")
    await replacement.stop()


async def test_a_lane_stopped_while_its_action_is_unanswered_stops_the_whole_child() -> None:
    pool = LanePool(spawner("take"), 4)
    first = await pool()
    waiting = asyncio.create_task(pool())
    await initialize(first, "shardId-0")
    second = await waiting
    await initialize(second, "shardId-1")
    await second.write(encode_daemon_message(ShardEnded()), 5.0)
    with pytest.raises(ChildTimeout):
        await second.read_line(0.2, "shardEnded")
    assert await second.stop() == 0  # stopped with its action unanswered (a timeout): the child goes
    with pytest.raises(ChildExited):
        await first.read_line(10.0, "processRecords")
    await first.stop()
