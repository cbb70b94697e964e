"""What ``kcl-daemon dead-letters`` does: list per shard, show one, replay (to a stream, or to the
configured processor locally, as ``kcl-daemon replay`` does). Letters are never removed by these commands.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from collections.abc import Iterable

from kcl_daemon.aws.clients import client_settings_from
from kcl_daemon.aws.dead_letter_puts import KinesisPuts, dead_letter_client
from kcl_daemon.config.settings import Settings
from kcl_daemon.core.lifecycle.dead_letter_address import parse_dead_letter_address
from kcl_daemon.core.sequence import TRIM_HORIZON
from kcl_daemon.dead_letter_tool.readers import Found, read_letters
from kcl_daemon.dead_letters.letter import DeadLetter
from kcl_daemon.errors import ConfigError, DeadLetterWriteFailed
from kcl_daemon.replay.command import ShardReport, run_replay
from kcl_protocol import Record


def destination_of(settings: Settings, override: str | None) -> str:
    destination = override or settings.dead_letter_destination
    if destination is None:
        raise ConfigError(["no dead-letter destination: set deadLetterDestination or pass --destination"])
    return destination


def load(settings: Settings, override: str | None) -> Found:
    try:
        address = parse_dead_letter_address(destination_of(settings, override))
    except ValueError as exc:
        raise ConfigError([f"deadLetterDestination {exc}"]) from None
    return read_letters(address, client_settings_from(settings))


def select(
    letters: Iterable[DeadLetter], shard: str | None, sequence: str | None, sub: int | None
) -> list[DeadLetter]:
    return [
        x
        for x in letters
        if (shard is None or x.shard_id == shard)
        and (sequence is None or x.sequence_number == sequence)
        and (sub is None or x.sub_sequence_number == sub)
    ]


def listing(found: Found) -> str:
    """Per shard: the count, then one line per letter (never its payload)."""
    lines: list[str] = []
    by_shard: dict[str, list[DeadLetter]] = {}
    for letter in found.letters:
        key = letter.shard_id if letter.stream is None else f"{letter.stream}:{letter.shard_id}"
        by_shard.setdefault(key, []).append(letter)
    for shard, letters in sorted(by_shard.items()):
        lines.append(f"{shard}: {len(letters)} dead letter(s)")
        lines.extend(
            f"  {x.sequence_number}/{x.sub_sequence_number}  {x.failure.kind}  attempts {x.attempts}  "
            f"{x.dead_lettered_at}  {len(base64.b64decode(x.data_b64))} bytes"
            for x in letters
        )
    lines.extend(f"unreadable: {problem}" for problem in found.unreadable)
    lines.append(f"total: {len(found.letters)} dead letter(s) in {len(by_shard)} shard(s)")
    return "\n".join(lines)


def listing_json(found: Found) -> dict[str, object]:
    summary = [
        {k: v for k, v in x.to_json().items() if k not in ("data", "failure")}
        | {"failureKind": x.failure.kind}
        for x in found.letters
    ]
    return {"deadLetters": summary, "unreadable": found.unreadable}


def replay_to_stream(
    settings: Settings, letters: list[DeadLetter], stream: str, *, dry_run: bool
) -> list[str]:
    """Put each record back on ``stream`` (its data and partition key; a new sequence number), in order."""
    lines = [
        f"{'would put' if dry_run else 'put'} {x.name} ({len(base64.b64decode(x.data_b64))} bytes, "
        f"partition key of the original) on {stream}"
        for x in letters
    ]
    if dry_run:
        return lines
    puts = KinesisPuts(dead_letter_client(client_settings_from(settings), "kinesis"), stream)
    for letter in letters:
        try:
            puts.put(letter.record().data, letter.partition_key)
        except Exception as exc:  # noqa: BLE001 - reported with what was put so far
            raise DeadLetterWriteFailed(
                f"putting {letter.name} on {stream} failed after {letters.index(letter)} record(s): {exc}"
            ) from None
    return lines


def replay_to_processor(
    settings: Settings, letters: list[DeadLetter], *, batch_size: int
) -> list[ShardReport]:
    """Feed the records, per shard, to the configured processor locally (as ``kcl-daemon replay``); the
    policy is RETRY here, so nothing is dead-lettered again."""
    shards: dict[str, list[Record]] = {}
    for letter in letters:
        shards.setdefault(letter.shard_id, []).append(letter.record())
    local = dataclasses.replace(settings, poison_record_policy="RETRY")
    return asyncio.run(run_replay(local, shards, batch_size=batch_size, initial_checkpoint=TRIM_HORIZON))
