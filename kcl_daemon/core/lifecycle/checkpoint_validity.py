"""Whether a stored checkpoint can be used to read a shard at all (pure).

A lease table is shared, hand-editable state: a checkpoint may hold a sequence number longer than
Kinesis allows (its API pattern is ``0|([1-9]\\d{0,128})``) or a sub-sequence number beyond Java's
``long``. Sending such a value to Kinesis fails in ways that look transient on some emulators (a 500),
so it is refused here, with a message that names the value (shortened), before any call is made.
"""

from __future__ import annotations

from kcl_daemon.core.sequence import ExtendedSequenceNumber

MAX_SEQUENCE_DIGITS = 129
MAX_SUB_SEQUENCE_NUMBER = 2**63 - 1  # Java's Long.MAX_VALUE


def shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def unusable_checkpoint(checkpoint: ExtendedSequenceNumber) -> str | None:
    """Why ``checkpoint`` cannot be used to read its shard, or None if it can."""
    if checkpoint.is_sentinel:
        return None
    sequence = checkpoint.sequence_number
    if len(sequence) > MAX_SEQUENCE_DIGITS:
        return (
            f"checkpoint sequence number {shorten(sequence)} is longer than the "
            f"{MAX_SEQUENCE_DIGITS} digits Kinesis allows"
        )
    sub = checkpoint.sub_sequence_number
    if not 0 <= sub <= MAX_SUB_SEQUENCE_NUMBER:
        return f"checkpoint sub-sequence number {shorten(str(sub))} is outside 0..2^63-1"
    return None
