"""Everything a local run needs, in one context manager: the embedded backend, a provisioned stream,
clients for the daemon, and (optionally) the sample producer.

This is what ``kcl-daemon --local`` style entry points call; it starts things in dependency order and
stops them in reverse (producer, then clients and server).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Final

from kcl_daemon.aws.clients import AwsClients, ClientSettings
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.provision import StreamWriter, ensure_stream
from kcl_daemon.local.embedded import DEFAULT_REGION, EmbeddedBackend
from kcl_daemon.local.producer import (
    DEFAULT_RATE_PER_S,
    Producer,
    open_hash_ranges,
    partition_keys_for,
)

logger = logging.getLogger(__name__)

DEFAULT_STREAM_NAME: Final = "kcl-daemon-local"
DEFAULT_SHARD_COUNT: Final = 4


@dataclass(frozen=True, slots=True)
class LocalStack:
    """A running local stack. ``settings`` and ``clients`` point at the embedded backend; the clients
    carry the backend's dummy credentials and are closed when the stack stops."""

    backend: EmbeddedBackend
    settings: ClientSettings
    clients: AwsClients
    stream_name: str
    stream_created: bool
    producer: Producer | None
    ready_s: float  # seconds from start until the stream was ACTIVE


@contextmanager
def local_stack(
    stream_name: str = DEFAULT_STREAM_NAME,
    *,
    shard_count: int = DEFAULT_SHARD_COUNT,
    region: str = DEFAULT_REGION,
    base_settings: ClientSettings | None = None,
    produce: bool = True,
    rate_per_s: float = DEFAULT_RATE_PER_S,
    aggregate_every: int = 0,
    wait_s: float = 30.0,
) -> Iterator[LocalStack]:
    """Start moto on 127.0.0.1, create ``stream_name`` with ``shard_count`` shards (idempotent), and,
    if ``produce``, start the sample producer at ``rate_per_s`` records per second (every
    ``aggregate_every + 1``-th one a KPL aggregate when ``aggregate_every > 0``).

    ``base_settings`` supplies timeouts, pool size and attempts for the daemon's clients; region and
    endpoints are always the backend's. Raises :class:`kcl_daemon.local.embedded.LocalBackendUnavailable`
    if moto is missing.
    """
    started = time.monotonic()
    with ExitStack() as stack:
        backend = stack.enter_context(EmbeddedBackend(region=region))
        clients = backend.build_clients(base_settings)
        created = ensure_stream(clients.kinesis, stream_name, shard_count, wait_s)
        ready_s = time.monotonic() - started
        logger.info(
            "local stream %s (%d shards asked for) is ACTIVE %.2fs after start (%s)",
            stream_name,
            shard_count,
            ready_s,
            "created" if created else "already there",
        )
        producer: Producer | None = None
        if produce:
            keys = partition_keys_for(open_hash_ranges(Kinesis(clients.kinesis).list_shards(stream_name)))
            producer = Producer(
                StreamWriter(clients.kinesis, stream_name),
                keys,
                rate_per_s=rate_per_s,
                aggregate_every=aggregate_every,
            )
            stack.enter_context(producer)
            logger.info("local producer putting %.1f records/s into %s", rate_per_s, stream_name)
        yield LocalStack(
            backend=backend,
            settings=backend.client_settings(base_settings),
            clients=clients,
            stream_name=stream_name,
            stream_created=created,
            producer=producer,
            ready_s=ready_s,
        )
        if producer is not None:
            stats = producer.stop()
            logger.info(
                "local producer sent %d records (%d Kinesis records, %d aggregated)",
                stats.user_records,
                stats.kinesis_records,
                stats.aggregated_records,
            )
