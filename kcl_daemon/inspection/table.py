"""Read a lease table for `kcl-daemon leases`: one scan, or two a failover apart to see expiry, plus shards.

Expiry is a local observation in the KCL (contract §4.3): a lease is expired when its counter has not moved
for ``failoverTimeMillis``. One scan cannot tell, so expiry is checked only on request, by scanning
again after the failover time; otherwise it is reported as unknown. The shard list is optional: when
ListShards fails, the report says so instead of failing. The table's layout and KCL 3.5 table-migration
state (:mod:`kcl_daemon.core.leader.layout`) are read alongside when the caller can. Rendering is in
:mod:`kcl_daemon.inspection.report`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kcl_daemon.clock import Clock
from kcl_daemon.core.inspection.distribution import Distribution, cluster_of, summarize
from kcl_daemon.core.leader.layout import LayoutReport
from kcl_daemon.core.leases.expiry import LeaseObservations
from kcl_daemon.core.leases.lease_codec import ScanResultLike
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.errors import KclError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeaseTableReport:
    table_name: str
    distribution: Distribution
    skipped_items: tuple[str, ...]
    shard_list_error: str | None = None
    layout: LayoutReport | None = None
    layout_error: str | None = None


async def inspect_lease_table(
    table_name: str,
    scan: Callable[[], ScanResultLike],
    *,
    list_shards: Callable[[], Sequence[Shard]] | None,
    clock: Clock,
    expiry_wait_s: float | None = None,
    cluster_separator: str = "-",
    describe_layout: Callable[[], LayoutReport] | None = None,
) -> LeaseTableReport:
    """Scan (twice, ``expiry_wait_s`` apart, if given) and summarize; blocking calls run on threads."""
    first = await asyncio.to_thread(scan)
    result = first
    expired: frozenset[str] | None = None
    if expiry_wait_s is not None:
        observations = LeaseObservations().observe(first.leases, clock.monotonic())
        await clock.sleep(expiry_wait_s)
        result = await asyncio.to_thread(scan)
        now = clock.monotonic()
        observations = observations.observe(result.leases, now)
        expired = frozenset(
            lease.lease_key
            for lease in result.leases
            if lease.lease_owner is not None and observations.age(lease.lease_key, now) >= expiry_wait_s
        )
    shard_ids: list[str] | None = None
    shard_error: str | None = None
    if list_shards is not None:
        try:
            shard_ids = [shard.shard_id for shard in await asyncio.to_thread(list_shards)]
        except KclError as exc:
            shard_error = str(exc)
            logger.warning("cannot list the stream's shards: %s", exc)
    layout: LayoutReport | None = None
    layout_error: str | None = None
    if describe_layout is not None:
        try:
            layout = await asyncio.to_thread(describe_layout)
        except KclError as exc:
            layout_error = str(exc)
            logger.warning("cannot read the table layout: %s", exc)
    distribution = summarize(
        result.leases,
        expired_keys=expired,
        shard_ids=shard_ids,
        cluster=lambda worker: cluster_of(worker, cluster_separator),
    )
    return LeaseTableReport(
        table_name, distribution, tuple(result.skipped), shard_error, layout, layout_error
    )
