"""Stream identities and multi-stream lease keys (contract §3.2, Java ``StreamIdentifier`` and
``MultiStreamLease``), as pure functions over strings.

A stream in a multi-stream application is ``accountId:streamName:creationEpoch`` (the lease
attribute ``streamName`` holds exactly that); its leases are keyed ``<that>:<shardId>``, e.g.
``123456789012:my-stream:1610000000:shardId-000000000007``. Single-stream leases are keyed by the
plain shard id. Stream names are 1-128 of ``[a-zA-Z0-9_.-]`` and shard ids contain no ``:``, so the
split is unambiguous.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_ACCOUNT: Final = re.compile(r"\d{12}")
_STREAM_NAME: Final = re.compile(r"[a-zA-Z0-9_.-]{1,128}")
_SHARD_ID: Final = re.compile(r"[^:]{1,128}")
_STREAM_ARN: Final = re.compile(r"arn:aws[a-z-]*:kinesis:[a-z0-9-]+:(\d{12}):stream/([a-zA-Z0-9_.-]{1,128})")


@dataclass(frozen=True, slots=True, order=True)
class StreamIdentity:
    account_id: str
    stream_name: str
    creation_epoch: int  # seconds since 1970-01-01 UTC (the stream's creation time)

    def __post_init__(self) -> None:
        if not _ACCOUNT.fullmatch(self.account_id):
            raise ValueError(f"account id {self.account_id!r} is not 12 digits")
        if not _STREAM_NAME.fullmatch(self.stream_name):
            raise ValueError(f"stream name {self.stream_name!r} is not 1-128 of [a-zA-Z0-9_.-]")
        if self.creation_epoch < 0:
            raise ValueError(f"creation epoch {self.creation_epoch} is negative")

    def serialize(self) -> str:
        """``accountId:streamName:creationEpoch``, the lease attribute ``streamName``."""
        return f"{self.account_id}:{self.stream_name}:{self.creation_epoch}"

    def lease_key(self, shard_id: str) -> str:
        """The multi-stream lease key of one of this stream's shards."""
        if not _SHARD_ID.fullmatch(shard_id):
            raise ValueError(f"shard id {shard_id!r} is empty, too long or contains ':'")
        return f"{self.serialize()}:{shard_id}"


def parse_stream_identity(text: str) -> StreamIdentity:
    """``accountId:streamName:creationEpoch`` -> :class:`StreamIdentity`; ValueError saying what is wrong."""
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(f"stream identity {text!r} is not accountId:streamName:creationEpoch")
    account, name, epoch = parts
    if not (epoch.isascii() and epoch.isdigit()) or len(epoch) > 19:
        raise ValueError(f"stream identity {text!r}: creation epoch {epoch!r} is not a whole number")
    return StreamIdentity(account, name, int(epoch))


def identity_from_arn(stream_arn: str, creation_epoch: int) -> StreamIdentity:
    """The identity of the stream ``stream_arn`` names, created at ``creation_epoch``."""
    match = _STREAM_ARN.fullmatch(stream_arn)
    if match is None:
        raise ValueError(f"{stream_arn!r} is not a Kinesis stream ARN")
    return StreamIdentity(match.group(1), match.group(2), creation_epoch)


def split_lease_key(lease_key: str) -> tuple[StreamIdentity | None, str]:
    """(stream identity, shard id) of a lease key; (None, key) for a single-stream key (a plain shard id).

    A key with colons that is not a valid multi-stream key raises ValueError.
    """
    if ":" not in lease_key:
        return None, lease_key
    identity, _, shard_id = lease_key.rpartition(":")
    if not _SHARD_ID.fullmatch(shard_id):
        raise ValueError(f"lease key {lease_key!r} has no shard id after its stream identity")
    return parse_stream_identity(identity), shard_id
