"""Follows the KCL 3.5 table migration on every worker and drives it on the leader (contract §9.2).

* :meth:`TableMigrationDriver.follow` (a supervised loop on every worker): re-reads the stored status
  every ``poll_s`` so this worker's write targets and lock place follow the live state;
* :meth:`TableMigrationDriver.confirm`: the election's check after taking a lock (re-read, then where the
  lock belongs);
* :meth:`TableMigrationDriver.step`: called by the leader after each assignment run, with the owners of
  the unexpired leases it just saw; asks :func:`~kcl_daemon.core.leader.table_migration.leader_step`
  for the transition and makes it: each write conditional on the status read, the moves and COMPLETE as
  transactions fenced on the legacy ``Leader`` item naming this worker (Java's fencing).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, TypeVar

from kcl_daemon.clock import Clock
from kcl_daemon.core.leader import table_migration as tm
from kcl_daemon.core.leader.client_version import MIGRATION_KEY
from kcl_daemon.errors import KclError, LeaseConflict
from kcl_daemon.leader.tables import FleetMetrics, Tables

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: the entityType a moved legacy item gets in the lease table, by key (contract §9.1)
MOVED_KINDS = {MIGRATION_KEY: "CLIENT_VERSION_MIGRATION"}


@dataclass(frozen=True, slots=True)
class MigrationConfig:
    worker_id: str
    migrate_all: bool = False
    complete_bake_s: float = tm.COMPLETE_BAKE_DEFAULT_S
    init_bake_s: float = tm.INIT_BAKE_S
    reporter_period_s: float = 30.0
    poll_s: float = 30.0


class TableMigrationDriver:
    def __init__(
        self,
        tables: Tables,
        metrics: FleetMetrics,
        config: MigrationConfig,
        clock: Clock,
        pool: Executor,
        *,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.tables = tables
        self.config = config
        self.last: tm.Transition | None = None
        #: called on the event loop with True just before the COMPLETE transaction and with False after
        #: it (the election stops leading meanwhile: the lock may move the moment COMPLETE commits)
        self.completing: Callable[[bool], None] | None = None
        self._metrics = metrics
        self._clock = clock
        self._pool = pool
        self._wall = wall

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    async def follow(self) -> None:
        """Keep the local status current (every worker; nothing is read once COMPLETE)."""
        while True:
            await self._clock.sleep(self.config.poll_s)
            if self.tables.status is tm.TableMigrationStatus.COMPLETE:
                continue
            try:
                await self._call(self.tables.refresh)
            except (KclError, ValueError) as exc:
                logger.warning("reading the table-migration status failed: %s", exc)

    async def confirm(self) -> Any:
        """Re-read the status; where the ``Leader`` lock belongs now."""
        await self._call(self.tables.refresh)
        return self.tables.lock_store()

    async def step(self, lease_owners: frozenset[str]) -> tm.Transition | None:
        """One leader step (after an assignment run). None once COMPLETE."""
        tables = self.tables
        if tables.status is tm.TableMigrationStatus.COMPLETE:
            return None
        await self._call(tables.refresh)
        stored_at = None
        if tables.stored_item is not None:
            mts = tables.stored_item.get(tm.MODIFIED_AT_MS)
            stored_at = int(mts) if isinstance(mts, int | float) else None
        legacy_keys: frozenset[str] = frozenset()
        if tables.stored in (tm.TableMigrationStatus.DEPLOYED, tm.TableMigrationStatus.PENDING):
            items = await self._call(tables.legacy.scan)
            legacy_keys = frozenset(str(item.get("key")) for item in items)
        view = tm.MigrationView(
            tables.stored,
            stored_at,
            lease_owners,
            self._metrics.rows,
            legacy_keys,
            self._wall(),
            self.config.reporter_period_s,
        )
        transition = tm.leader_step(
            view, self.config.migrate_all, self.config.complete_bake_s, self.config.init_bake_s
        )
        if self.last is None or (transition.step, transition.reason) != (self.last.step, self.last.reason):
            level = logging.INFO if transition.step is not tm.Step.NONE else logging.DEBUG
            logger.log(level, "table migration: %s (%s)", transition.step.value, transition.reason)
        self.last = transition
        if transition.step is tm.Step.NONE:
            return transition
        completing = transition.step is tm.Step.COMPLETE and self.completing is not None
        if completing:
            assert self.completing is not None
            self.completing(True)
        try:
            await self._call(functools.partial(self._apply, transition, legacy_keys))
        except LeaseConflict as exc:
            logger.info("table migration: %s not applied: %s", transition.step.value, exc)
        finally:
            if completing:
                assert self.completing is not None
                self.completing(False)
        return transition

    def _attributes(self, status: tm.TableMigrationStatus) -> dict[str, object]:
        return tm.status_attributes(
            status, self.config.worker_id, int(self._wall() * 1000), self.tables.stored_item
        )

    def _apply(self, transition: tm.Transition, legacy_keys: frozenset[str]) -> None:
        legacy, key = self.tables.legacy, tm.TABLE_MIGRATION_KEY
        step, writes, expects = transition.step, transition.writes, transition.expects
        if step is tm.Step.CREATE_INIT:
            legacy.put(key, self._attributes(tm.TableMigrationStatus.INIT), require_absent=True)
        elif step is tm.Step.DELETE_INIT:
            legacy.delete(key, require_equal={tm.STATUS_ATTRIBUTE: tm.TableMigrationStatus.INIT.value})
        elif step is tm.Step.MOVE_AND_PEND:
            self._move(legacy_keys)
            assert writes is not None
            assert expects is not None
            legacy.put(key, self._attributes(writes), require_equal={tm.STATUS_ATTRIBUTE: expects.value})
        elif step is tm.Step.COMPLETE:
            self._complete()
        else:  # DEPLOY, ROLL_BACK
            assert writes is not None
            assert expects is not None
            legacy.put(key, self._attributes(writes), require_equal={tm.STATUS_ATTRIBUTE: expects.value})
        if writes is not None and step is not tm.Step.COMPLETE:
            self.tables.refresh()
        logger.info("table migration: %s done", step.value)

    def _fence(self) -> dict[str, Any]:
        check: dict[str, Any] = self.tables.legacy.condition_check(
            tm.LEADER_KEY, {"ownerName": self.config.worker_id}
        )
        return check

    def _move(self, legacy_keys: frozenset[str]) -> None:
        """Every legacy item but the lock and the migration item into the lease table, 25 per
        transaction, each fenced on the legacy lock naming this worker; then check none is left."""
        legacy, single = self.tables.legacy, self.tables.lease_table
        movable = [k for k in tm.items_to_move(legacy_keys) if k in MOVED_KINDS]
        skipped = [k for k in tm.items_to_move(legacy_keys) if k not in MOVED_KINDS]
        if skipped:
            logger.warning("table migration: legacy item(s) of no known kind stay behind: %s", skipped)
        for batch in tm.batches(movable):
            entries = [self._fence()]
            for key in batch:
                raw = legacy.raw_item(key)
                if raw is None:
                    continue
                item = single.adopt(key, raw, legacy.key_name, MOVED_KINDS[key])
                entries.append(single.put_entry(item, require_absent=True))
                entries.append(legacy.delete_entry(key))
            if len(entries) > 1:
                legacy.transact(entries, f"move {len(batch)} legacy item(s) into {single.table_name}")
        left = {str(item.get("key")) for item in legacy.scan()}
        if any(k in MOVED_KINDS for k in tm.items_to_move(left)):
            raise LeaseConflict(f"legacy items still present after the move: {sorted(left)}")
        logger.info("table migration: %d legacy item(s) moved into %s", len(movable), single.table_name)

    def _complete(self) -> None:
        legacy, single = self.tables.legacy, self.tables.lease_table
        attributes = self._attributes(tm.TableMigrationStatus.COMPLETE)
        key = tm.TABLE_MIGRATION_KEY
        entries = [
            self._fence(),
            single.put_entry(
                single.item(key, attributes, tm.TABLE_MIGRATION_ENTITY_TYPE), require_absent=True
            ),
            legacy.put_entry(
                legacy.item(key, attributes),
                require_equal={tm.STATUS_ATTRIBUTE: tm.TableMigrationStatus.PENDING.value},
            ),
        ]
        legacy.transact(entries, "complete the table migration")
        self.tables.force(tm.TableMigrationStatus.COMPLETE)
