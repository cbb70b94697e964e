"""The shard lister the lease reports (`kcl-daemon leases`, its live view) compare the table with.

One stream (``streamName``/``streamArn``): its shards by shard id, as the leases are keyed. Several
(``streamNames``): every configured stream's shards, named by multi-stream lease key
(:func:`kcl_daemon.shards.multi_stream.shards_by_lease_key`). No stream configured: None.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.streams import describe_stream_identity
from kcl_daemon.config.slices import ShardSlice
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.retry import KINESIS
from kcl_daemon.shards.multi_stream import shards_by_lease_key

if TYPE_CHECKING:
    from mypy_boto3_kinesis import KinesisClient


def configured_shard_lister(
    shards: ShardSlice, client: KinesisClient, kinesis: Kinesis
) -> Callable[[], Sequence[Shard]] | None:
    if shards.streams:
        identity_of = functools.partial(describe_stream_identity, client)
        return functools.partial(shards_by_lease_key, kinesis, identity_of, shards.streams)
    stream = shards.stream_name
    if stream is None:
        return None
    return functools.partial(KINESIS.call, kinesis.list_shards, stream)
