"""The :class:`Checkpointer`: one checkpoint request, its reply, and an opt-in retry of retriable errors.

A checkpointer belongs to the call it was passed to (``process_records``, ``shard_ended`` or
``shutdown_requested``) and refuses to work once that call has returned: the daemon only answers
checkpoint requests while an action is outstanding, and a late request would be read as the reply to
something else. Within the call it may be used from any thread; exchanges are serialized.
"""

from __future__ import annotations

import logging
import time
from typing import overload

from kcl_client._errors import INVALID_STATE, CheckpointError
from kcl_client._io import ChannelLike
from kcl_client._messages import CheckpointReply, checkpoint_request
from kcl_client._records import Record

logger = logging.getLogger("kcl_client")


class Checkpointer:
    """Records progress in the lease table, so a restarted processor resumes after the checkpoint."""

    def __init__(self, channel: ChannelLike, action: str) -> None:
        self._channel = channel
        self._action = action
        self._open = True

    def __repr__(self) -> str:
        state = "open" if self._open else "finished"
        return f"<Checkpointer for {self._action} ({state})>"

    @overload
    def checkpoint(self, at: None = None, *, retries: int = 0, backoff_s: float = 1.0) -> None: ...

    @overload
    def checkpoint(self, at: Record, *, retries: int = 0, backoff_s: float = 1.0) -> None: ...

    @overload
    def checkpoint(
        self, at: str, sub_sequence_number: int | None = None, *, retries: int = 0, backoff_s: float = 1.0
    ) -> None: ...

    def checkpoint(
        self,
        at: Record | str | None = None,
        sub_sequence_number: int | None = None,
        *,
        retries: int = 0,
        backoff_s: float = 1.0,
    ) -> None:
        """Checkpoint and wait for the daemon's answer; raise :class:`CheckpointError` if it refuses.

        * ``checkpoint()``: everything delivered so far (during ``shard_ended``: the end of the shard);
        * ``checkpoint(record)``: at that record (its sequence and sub-sequence number);
        * ``checkpoint("4959...", 2)``: at an explicit position (sub-sequence ``None`` means 0).

        With ``retries=n``, a retriable error (``ThrottlingException``,
        ``KinesisClientLibDependencyException``) is retried up to ``n`` more times, sleeping
        ``backoff_s``, then twice that, and so on. Other errors are raised at once.
        """
        if retries < 0 or backoff_s < 0:
            raise ValueError("retries and backoff_s must not be negative")
        if isinstance(at, Record):
            if sub_sequence_number is not None:
                raise TypeError("checkpoint(record) takes the sub-sequence number from the record")
            sequence_number: str | None = at.sequence_number
            sub_sequence_number = at.sub_sequence_number
        else:
            sequence_number = at
            if sequence_number is None and sub_sequence_number is not None:
                raise TypeError("a sub-sequence number needs a sequence number")
        attempt = 0
        while True:
            try:
                self._checkpoint_once(sequence_number, sub_sequence_number)
            except CheckpointError as exc:
                if not exc.retriable or attempt >= retries:
                    raise
                delay_s = backoff_s * 2**attempt
                attempt += 1
                logger.warning("%s; retry %d of %d in %.1f s", exc, attempt, retries, delay_s)
                time.sleep(delay_s)
            else:
                return

    def _checkpoint_once(self, sequence_number: str | None, sub_sequence_number: int | None) -> None:
        if not self._open:
            raise RuntimeError(
                f"this checkpointer belonged to a {self._action} call that has returned; "
                "checkpoint only while the call you got it from is running"
            )
        reply = self._channel.exchange(checkpoint_request(sequence_number, sub_sequence_number))
        if reply is None:
            raise EOFError("the daemon closed stdin while a checkpoint was waiting for its reply")
        if not isinstance(reply, CheckpointReply):
            # The daemon must answer a request with the very next line. amazon_kclpy treats anything else
            # the same way; the message read here is lost.
            logger.error("expected the reply to a checkpoint request, got %r", reply)
            raise CheckpointError(INVALID_STATE, sequence_number, sub_sequence_number)
        if reply.error is not None:
            raise CheckpointError(reply.error, sequence_number, sub_sequence_number)

    def _close(self) -> None:
        self._open = False
