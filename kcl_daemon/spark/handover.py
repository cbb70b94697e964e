"""Exact lease-table checkpoints after the batches Spark's ``commit()`` never reports.

Spark calls the source's ``commit(end)`` only when it plans the *next* batch, so the checkpoints the
running query writes lag one batch, and the last batch of a run (AvailableNow, or before a stop) is never
committed to the source at all. Two ways to close the gap, both writing through
:func:`kcl_daemon.spark.lease_bridge.write_checkpoints` (as the lease owner, or into released leases,
never backwards):

* :func:`sync_lease_table` after the query stopped: reads the last *committed* batch's end offset from
  the query's checkpoint directory (``commits/N`` + ``offsets/N``) and writes the positions after it
  (with executor reads, the ends the batch's tasks published; with driver reads, the offset itself).
  Deterministic; the step to run before starting daemons again. Local (or locally mounted) checkpoint
  directories only.
* :class:`~kcl_daemon.spark.listener.KinesisLeaseSyncListener`, installed with
  ``spark.streams.addListener``: writes each batch's end offset from the query's progress events
  while the query runs. Asynchronous (events can be late, and are lost if the driver dies), so the
  hand-over still ends with :func:`sync_lease_table` when exact checkpoints matter.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from kcl_daemon.core.spark.batches import BatchOffset, committed_offset, parse_offset
from kcl_daemon.core.spark.offsets import BadOffset, SourceOffset
from kcl_daemon.retry import KINESIS
from kcl_daemon.spark.clients import batch_ends_for, kinesis_for, lease_table_for
from kcl_daemon.spark.lease_bridge import CheckpointReport, release_owned, write_checkpoints
from kcl_daemon.spark.options import SourceOptions, parse_options

logger = logging.getLogger(__name__)


def last_committed_offset(
    checkpoint_location: str | Path, source_index: int = 0
) -> BatchOffset | SourceOffset | None:
    """The end offset of the last batch Spark committed, for source ``source_index``; None if none yet.

    ``offsets/N`` holds a version line, a metadata line, then one line per source, in query order.
    """
    root = Path(str(checkpoint_location).removeprefix("file:"))
    commits = root / "commits"
    if not commits.is_dir():
        return None
    done = sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    if not done:
        return None
    path = root / "offsets" / str(done[-1])
    lines = path.read_text().splitlines()
    if len(lines) < 3 + source_index:
        raise BadOffset(f"{path}: no offset line for source {source_index}")
    return parse_offset(json.loads(lines[2 + source_index]))


def owner_of(options: SourceOptions) -> str:
    """The worker id the query writes into leases: ``leaseOwner``, else one derived from the table."""
    return options.lease_owner or f"spark:{options.lease_table_name}"


def positions_after(options: SourceOptions, offset: BatchOffset | SourceOffset) -> SourceOffset:
    """Where every shard stands after the batch ``offset`` ended: a v1 offset is that already; a v2
    offset's read shards stand where their tasks published (read from the store)."""
    if isinstance(offset, SourceOffset):
        return offset
    ends = (
        batch_ends_for(options).read_batch(offset.run, offset.batch, offset.read_shards)
        if offset.read_shards
        else {}
    )
    return committed_offset(offset, ends)


def write_offset(options: SourceOptions, offset: BatchOffset | SourceOffset) -> CheckpointReport:
    """Write the positions after the batch ``offset`` as lease checkpoints."""
    if offset.stream != options.stream_name:
        raise BadOffset(f"the offset is of stream {offset.stream}, not {options.stream_name}")
    positions = positions_after(options, offset)
    table = lease_table_for(options)
    shards = KINESIS.call(kinesis_for(options).list_shards, options.stream_name)
    return write_checkpoints(table, positions, shards, owner_of(options))


def sync_lease_table(
    checkpoint_location: str | Path, options: Mapping[str, str], *, source_index: int = 0
) -> CheckpointReport:
    """Write the stopped query's exact final checkpoints and release its leases (``options``: the
    source's own options). The query's source runner releases them too when Spark lets it finish;
    this makes the hand-over independent of that."""
    parsed = parse_options(options)
    if parsed.lease_table_name is None:
        raise ValueError("sync_lease_table needs the source's leaseTableName option")
    offset = last_committed_offset(checkpoint_location, source_index)
    report = CheckpointReport()
    if offset is None:
        logger.info("no committed batch in %s: no checkpoint to write", checkpoint_location)
    else:
        report = write_offset(parsed, offset)
    report.released = release_owned(lease_table_for(parsed), owner_of(parsed))
    logger.info(
        "lease table %s: %d checkpoint(s) written, %d refused, %d lease(s) released",
        parsed.lease_table_name,
        len(report.written),
        len(report.refused),
        len(report.released),
    )
    return report
