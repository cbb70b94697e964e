"""Where a record goes: its effective hash key, and the open shard whose range holds it.

A record's hash key is its explicit hash key if it has one, else the MD5 of its UTF-8 partition key read
as a 128-bit big-endian integer (how Kinesis routes a PutRecords entry; KPL aggregates carry each user
record's own). Readers drop a KPL aggregate any of whose user records hashes outside the shard it was
read from (contract §1.12), so writers that aggregate must group user records by the shard they hash to.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence

from kcl_daemon.core.shards.graph import Shard


def effective_hash_key(partition_key: str, explicit_hash_key: int | None) -> int:
    """The explicit hash key if there is one, else MD5(UTF-8 partition key) as a big-endian integer."""
    if explicit_hash_key is not None:
        return explicit_hash_key
    return int.from_bytes(hashlib.md5(partition_key.encode("utf-8"), usedforsecurity=False).digest(), "big")


class HashKeyMap:
    """The open shards of a listing, looked up by hash key (their ranges tile 0..2^128-1)."""

    def __init__(self, shards: Sequence[Shard]) -> None:
        self.shards = sorted((s for s in shards if s.is_open), key=lambda s: s.starting_hash_key)
        self._starts = [s.starting_hash_key for s in self.shards]

    def shard_for(self, hash_key: int) -> Shard | None:
        """The open shard whose hash range holds ``hash_key``; None if no listed shard does."""
        index = bisect.bisect_right(self._starts, hash_key) - 1
        if index < 0:
            return None
        shard = self.shards[index]
        return shard if hash_key <= shard.ending_hash_key else None
