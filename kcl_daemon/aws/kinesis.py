"""Kinesis data-plane and control-plane calls the daemon needs. So far: ListShards (spec 6.2, 6.3)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kcl_daemon.aws.errors import map_aws_errors
from kcl_daemon.core.shard_graph import Shard
from kcl_daemon.errors import AwsError

if TYPE_CHECKING:
    from mypy_boto3_kinesis import KinesisClient


class ShardFilterType(enum.StrEnum):
    AT_LATEST = "AT_LATEST"
    AT_TRIM_HORIZON = "AT_TRIM_HORIZON"
    AT_TIMESTAMP = "AT_TIMESTAMP"
    AFTER_SHARD_ID = "AFTER_SHARD_ID"
    FROM_TRIM_HORIZON = "FROM_TRIM_HORIZON"
    FROM_TIMESTAMP = "FROM_TIMESTAMP"


@dataclass(frozen=True, slots=True)
class ShardFilter:
    """The ListShards filter: ``timestamp`` for the *_TIMESTAMP types, ``shard_id`` for AFTER_SHARD_ID."""

    type: ShardFilterType
    timestamp: datetime | None = None
    shard_id: str | None = None

    def to_request(self) -> dict[str, Any]:
        request: dict[str, Any] = {"Type": str(self.type)}
        if self.timestamp is not None:
            request["Timestamp"] = self.timestamp
        if self.shard_id is not None:
            request["ShardId"] = self.shard_id
        return request


def shard_from_response(shard: Mapping[str, Any]) -> Shard:
    hash_range = shard["HashKeyRange"]
    sequence_range = shard["SequenceNumberRange"]
    ending = sequence_range.get("EndingSequenceNumber")
    return Shard(
        shard_id=shard["ShardId"],
        parent_shard_id=shard.get("ParentShardId"),
        adjacent_parent_shard_id=shard.get("AdjacentParentShardId"),
        starting_hash_key=int(hash_range["StartingHashKey"]),
        ending_hash_key=int(hash_range["EndingHashKey"]),
        starting_sequence_number=int(sequence_range["StartingSequenceNumber"]),
        ending_sequence_number=None if ending is None else int(ending),
    )


class Kinesis:
    """Synchronous Kinesis adapter over one boto3 client (thread-safe)."""

    def __init__(self, client: KinesisClient) -> None:
        self._client = client

    def list_shards(self, stream_name: str, shard_filter: ShardFilter | None = None) -> list[Shard]:
        """Every shard ListShards returns, following ``NextToken`` (follow-up pages carry only the token).

        ``MaxResults`` is never set: the default page is 10000 shards, and moto's paging is broken.
        A missing stream raises :class:`DependencyUnavailable`.
        """
        what = f"list shards of stream {stream_name}"
        request: dict[str, Any] = {"StreamName": stream_name}
        if shard_filter is not None:
            request["ShardFilter"] = shard_filter.to_request()
        shards: list[Shard] = []
        while True:
            with map_aws_errors(what):
                page = self._client.list_shards(**request)
            try:
                shards.extend(shard_from_response(shard) for shard in page.get("Shards", []))
            except (KeyError, ValueError) as exc:
                raise AwsError(f"{what}: malformed shard in the response: {exc!r}") from exc
            token = page.get("NextToken")
            if not token:
                return shards
            request = {"NextToken": token}
