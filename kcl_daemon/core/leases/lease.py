"""The lease value type: one row of the lease table, as the Java KCL reads and writes it (contract §3.2).

Field names are the snake_case forms of the Java attribute names; the camelCase names and DynamoDB
types live only in :mod:`kcl_daemon.core.leases.lease_codec`. Attributes this daemon does not understand are
kept in ``Lease.extra`` exactly as read, so writing a lease back never drops another writer's data.

Also here: lease keys. A single-stream key is the bare shard id (``shardId-000000000007``); a
multi-stream key is ``<accountId>:<streamName>:<creationEpoch>:<shardId>``. The multilang daemon is
always single-stream, but tables shared with multi-stream Java applications must still parse.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Final

from kcl_daemon.core.sequence import ExtendedSequenceNumber

MAX_HASH_KEY: Final = 2**128 - 1

_EMPTY: Final[Mapping[str, object]] = MappingProxyType({})

# Java StreamIdentifier: "(?<accountId>[0-9]+):(?<streamName>[^:]+):(?<creationEpoch>[0-9]+)".
_STREAM_IDENTIFIER = re.compile(r"(?P<account>[0-9]+):(?P<stream>[^:]+):(?P<epoch>[0-9]{1,19})")
_MULTI_STREAM_KEY = re.compile(
    r"(?P<account>[0-9]+):(?P<stream>[^:]+):(?P<epoch>[0-9]{1,19}):(?P<shard>[^:]+)"
)


class InvalidLeaseKey(ValueError):
    """A lease key that is neither a bare shard id nor ``account:stream:epoch:shardId``."""


@dataclass(frozen=True, slots=True)
class StreamIdentifier:
    """A serialized multi-stream identifier, ``<accountId>:<streamName>:<creationEpoch>``."""

    account_id: str
    stream_name: str
    creation_epoch: int

    @classmethod
    def parse(cls, text: str) -> StreamIdentifier:
        match = _STREAM_IDENTIFIER.fullmatch(text)
        if match is None:
            raise InvalidLeaseKey(f"{text!r} is not accountId:streamName:creationEpoch")
        return cls(match["account"], match["stream"], int(match["epoch"]))

    def __str__(self) -> str:
        return f"{self.account_id}:{self.stream_name}:{self.creation_epoch}"


@dataclass(frozen=True, slots=True)
class LeaseKey:
    """A parsed lease key: the plain shard id, plus the stream for multi-stream keys."""

    shard_id: str
    stream: StreamIdentifier | None = None

    @classmethod
    def parse(cls, lease_key: str) -> LeaseKey:
        if not lease_key:
            raise InvalidLeaseKey("empty lease key")
        if ":" not in lease_key:
            return cls(lease_key)
        match = _MULTI_STREAM_KEY.fullmatch(lease_key)
        if match is None:
            raise InvalidLeaseKey(f"{lease_key!r} is neither a shard id nor account:stream:epoch:shardId")
        stream = StreamIdentifier(match["account"], match["stream"], int(match["epoch"]))
        return cls(match["shard"], stream)

    def __str__(self) -> str:
        return self.shard_id if self.stream is None else f"{self.stream}:{self.shard_id}"


def lease_key_for(shard_id: str, stream_identifier: str | None = None) -> str:
    """The lease key of ``shard_id``: bare in single-stream mode, prefixed by the stream otherwise."""
    return shard_id if stream_identifier is None else f"{stream_identifier}:{shard_id}"


@dataclass(frozen=True, slots=True)
class Lease:
    """One lease as stored in DynamoDB (contract §3.2). ``None`` / empty means "attribute absent"."""

    lease_key: str
    checkpoint: ExtendedSequenceNumber
    lease_owner: str | None = None
    lease_counter: int = 0
    owner_switches_since_checkpoint: int = 0
    pending_checkpoint: ExtendedSequenceNumber | None = None
    pending_checkpoint_state: bytes | None = None
    parent_shard_ids: frozenset[str] = frozenset()
    child_shard_ids: frozenset[str] = frozenset()
    starting_hash_key: int | None = None
    ending_hash_key: int | None = None
    throughput_kbps: float | None = None
    checkpoint_owner: str | None = None
    entity_type: str | None = None
    stream_identifier: str | None = None  # attribute "streamName" (multi-stream only)
    stream_shard_id: str | None = None  # attribute "shardId" (multi-stream only)
    extra: Mapping[str, object] = field(default_factory=lambda: _EMPTY, hash=False)

    def __post_init__(self) -> None:
        if not self.lease_key:
            raise ValueError("lease_key is empty")
        if self.lease_counter < 0:
            raise ValueError(f"lease {self.lease_key}: lease_counter {self.lease_counter} is negative")
        if self.owner_switches_since_checkpoint < 0:
            raise ValueError(f"lease {self.lease_key}: owner_switches_since_checkpoint is negative")
        for name, value in (("starting", self.starting_hash_key), ("ending", self.ending_hash_key)):
            if value is not None and not 0 <= value <= MAX_HASH_KEY:
                raise ValueError(f"lease {self.lease_key}: {name} hash key {value} is outside 0..2^128-1")
        # Never alias the caller's dict: a frozen lease must not change behind our back.
        if self.extra is not _EMPTY:
            object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)) if self.extra else _EMPTY)

    @property
    def shard_id(self) -> str:
        """The plain shard id, in single- and multi-stream mode alike."""
        if self.stream_shard_id is not None:
            return self.stream_shard_id
        return LeaseKey.parse(self.lease_key).shard_id

    @property
    def stream(self) -> str | None:
        """The serialized stream identifier of a multi-stream lease, ``None`` in single-stream mode."""
        if self.stream_identifier is not None:
            return self.stream_identifier
        if ":" not in self.lease_key:
            return None
        parsed = LeaseKey.parse(self.lease_key).stream
        return None if parsed is None else str(parsed)

    @property
    def is_unowned(self) -> bool:
        return self.lease_owner is None

    @property
    def is_shard_end(self) -> bool:
        return self.checkpoint.is_shard_end

    def taken_by(self, worker_id: str) -> Lease:
        """The lease after a successful take/steal by ``worker_id`` (contract §4.2, 2.x/3.x take)."""
        switched = (self.lease_owner is not None and self.lease_owner != worker_id) or (
            self.checkpoint_owner == worker_id
        )
        return replace(
            self,
            lease_owner=worker_id,
            lease_counter=self.lease_counter + 1,
            owner_switches_since_checkpoint=self.owner_switches_since_checkpoint + int(switched),
            checkpoint_owner=None,
        )

    def renewed(self) -> Lease:
        """The lease after a successful renew by its owner (counter + 1, nothing else)."""
        return replace(self, lease_counter=self.lease_counter + 1)
