"""Moves kcl-daemon's non-lease items out of a lease table that KCL 2.x workers may read, as
:func:`kcl_daemon.core.leader.keep_out.choose_layout` decided (docs/migrating.md).

* ``Migration3.0``: one TransactWriteItems puts it into ``<app>-CoordinatorState`` (if absent there) and
  deletes it from the lease table on condition that its ``cv`` and ``mts`` are still the ones read, so a
  concurrent flip is never lost; if another worker moved it first, the lease-table copy (if any is left)
  is deleted on the same condition. Workers read the coordinator-state table first, so the item is never
  missing for a reader in between.
* Worker-metrics items: deleted on condition that their ``lut`` is still the one read; a live worker
  publishes its own again where its layout says (a kcl-daemon older than this one publishes it into the
  lease table again, and the layout check names it).

Blocking (boto3): run on the ``lease-3x`` pool, at start-up (``STARTUP`` retries).
"""

from __future__ import annotations

import logging
from typing import Any

from kcl_daemon.aws.coordinator_state import ENTITY_TYPE
from kcl_daemon.core.leader.keep_out import LayoutChoice
from kcl_daemon.core.leader.table_migration import MIGRATION_KEY
from kcl_daemon.errors import KclError, LeaseConflict
from kcl_daemon.retry import STARTUP

logger = logging.getLogger(__name__)

ATTEMPTS = 5


def move_out(choice: LayoutChoice, legacy: Any, lease_table: Any, lease_table_metrics: Any) -> None:
    """Create the side tables and move the items ``choice`` names out of the lease table."""
    legacy.create_table_if_missing()
    if choice.move_migration:
        _move_migration(legacy, lease_table)
    if choice.delete_metrics:
        entries, _ = STARTUP.call(lease_table_metrics.scan)
        luts = {e.worker_id: e.last_update_s for e in entries}
        for worker in choice.delete_metrics:
            if worker not in luts:
                continue
            try:
                STARTUP.call(lease_table_metrics.delete_stale, worker, luts[worker] or 0)
            except LeaseConflict:
                logger.info("worker metrics of %s changed while being deleted: its worker is alive", worker)
        logger.info("deleted %d worker-metrics item(s) from the lease table", len(choice.delete_metrics))


def _move_migration(legacy: Any, lease_table: Any) -> None:
    for _ in range(ATTEMPTS):
        here = STARTUP.call(lease_table.get, MIGRATION_KEY)
        if here is None:
            return
        unchanged = {"cv": here.get("cv"), "mts": here.get("mts")}
        there = STARTUP.call(legacy.get, MIGRATION_KEY)
        try:
            if there is None:
                attributes = {n: v for n, v in here.items() if n not in (ENTITY_TYPE, lease_table.key_name)}
                item = legacy.item(MIGRATION_KEY, attributes)
                lease_table.transact(
                    [
                        legacy.put_entry(item, require_absent=True),
                        lease_table.delete_entry(MIGRATION_KEY, require_equal=unchanged),
                    ],
                    "move Migration3.0 out of the lease table",
                )
                logger.warning(
                    "Migration3.0 (cv=%s) moved from the lease table %s into %s",
                    here.get("cv"),
                    lease_table.table_name,
                    legacy.table_name,
                )
            else:
                lease_table.delete(MIGRATION_KEY, require_equal=unchanged)
                logger.warning(
                    "Migration3.0 is in %s already (cv=%s): its copy in the lease table is deleted",
                    legacy.table_name,
                    there.get("cv"),
                )
        except LeaseConflict:
            continue  # changed meanwhile (another worker moved or flipped it): read again
        return
    raise KclError("Migration3.0 kept changing while this worker moved it out of the lease table")
