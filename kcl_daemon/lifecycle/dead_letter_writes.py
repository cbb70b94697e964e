"""Write one dead letter for a shard, retrying in place while the destination fails.

The shard waits meanwhile (its checkpoint may not pass the record before the write succeeded): each
failed attempt is counted (``dead_letter_write_failed``), the first one logged with the destination and
the record, and the attempts follow ``kcl_daemon.retry.DEAD_LETTER_WRITE``. A signal (lease lost,
shutdown) ends the wait: the write is abandoned and the caller delivers nothing past the record.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kcl_daemon.clock import Clock, sleep_unless_set
from kcl_daemon.dead_letters.letter import DeadLetter
from kcl_daemon.dead_letters.sinks import DeadLetterSink
from kcl_daemon.errors import DeadLetterWriteFailed
from kcl_daemon.metrics.observer import ShardObserver
from kcl_daemon.retry import DEAD_LETTER_WRITE

logger = logging.getLogger(__name__)


async def write_dead_letter(
    sink: DeadLetterSink,
    letter: DeadLetter,
    *,
    shard_id: str,
    clock: Clock,
    wake: asyncio.Event,
    interrupted: Callable[[], bool],
    observer: ShardObserver,
) -> bool:
    """True once ``letter`` is stored; False if ``interrupted()`` became true first (``wake`` is set
    with it, so a backoff does not outlast the signal)."""
    failures = 0

    async def sleep(seconds: float) -> None:
        await sleep_unless_set(clock, seconds, wake)

    retrying = DEAD_LETTER_WRITE.async_retrying(
        sleep=sleep,
        monotonic=clock.monotonic,
        retry_if=lambda exc: isinstance(exc, DeadLetterWriteFailed) and not interrupted(),
    )
    try:
        async for attempt in retrying:
            with attempt:
                if interrupted():
                    return False
                try:
                    await asyncio.to_thread(sink.write, letter)
                except DeadLetterWriteFailed as exc:
                    failures += 1
                    observer.poison("dead_letter_write_failed")
                    if failures == 1:
                        logger.warning(
                            "shard %s waits: the dead-letter destination %s failed (%s); retrying; "
                            "nothing is checkpointed past record %s meanwhile",
                            shard_id,
                            sink,
                            exc,
                            letter.name,
                        )
                    raise
    except DeadLetterWriteFailed:
        if interrupted():
            return False
        raise
    if failures:
        logger.warning(
            "shard %s: the dead-letter destination %s took the record after %d failed attempts",
            shard_id,
            sink,
            failures,
        )
    return True
