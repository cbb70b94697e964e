"""A query listener that mirrors each finished batch's end offset into the KCL lease table.

Install it with ``spark.streams.addListener(KinesisLeaseSyncListener(options))`` in the driver, with the
source's own options. It runs in the driver's Python process, asynchronously to the query: see
:mod:`kcl_daemon.spark.handover` for why it exists and what it cannot promise.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryListener,
)

from kcl_daemon.core.spark.batches import parse_offset
from kcl_daemon.spark.handover import write_offset
from kcl_daemon.spark.lease_bridge import CheckpointReport
from kcl_daemon.spark.options import parse_options

logger = logging.getLogger(__name__)


class KinesisLeaseSyncListener(StreamingQueryListener):
    """Write the positions after every finished batch of this stream as lease-table checkpoints (with
    executor reads, from the ends the batch's tasks published)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__()
        self.options = parse_options(options)
        if self.options.lease_table_name is None:
            raise ValueError("KinesisLeaseSyncListener needs the source's leaseTableName option")
        self.last_report: CheckpointReport | None = None

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        pass

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        pass

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        pass

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        for source in event.progress.sources:
            try:
                data = json.loads(source.endOffset or "null")
                if not isinstance(data, dict) or data.get("stream") != self.options.stream_name:
                    continue
                self.last_report = write_offset(self.options, parse_offset(data))
            except Exception:  # a listener must never take the query down; say why it did nothing
                logger.exception("lease sync of batch %s failed", event.progress.batchId)
