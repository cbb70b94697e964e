"""Runs one ``kcl-daemon migrate`` mode: read, plan (pure), print every write, and perform them unless
``--dry-run``.

Reads are the same as the workers' (``Migration3.0`` in the legacy coordinator-state table first, else
in the lease table; the layout of :func:`kcl_daemon.core.leader.layout.describe_layout`). Each write
is printed before it is made; a failed condition (someone changed ``Migration3.0`` meanwhile) stops the
command with exit 1 and nothing further is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.coordinator_state import COORDINATOR_KEY, LEASE_TABLE_KEY, CoordinatorStore
from kcl_daemon.aws.lease_table_3x import LeaseTable3x
from kcl_daemon.aws.table_facts import read_table_facts
from kcl_daemon.core.leader.client_version import MIGRATION_KEY
from kcl_daemon.core.leader.layout import LayoutReport, describe_layout
from kcl_daemon.core.leader.table_migration import Place
from kcl_daemon.core.migrate import plan as mp
from kcl_daemon.errors import DependencyUnavailable, ExitStatus, LeaseConflict


@dataclass(frozen=True, slots=True)
class MigrateTarget:
    lease_table: str
    coordinator_table: str
    metrics_table: str
    reporter_period_s: float = 30.0


def _find_client_version(
    clients: AwsClients, target: MigrateTarget
) -> tuple[dict[str, Any] | None, Place | None, str]:
    legacy = CoordinatorStore(clients.dynamodb, target.coordinator_table, COORDINATOR_KEY)
    try:
        item = legacy.get(MIGRATION_KEY)
    except DependencyUnavailable:
        item = None
    if item is not None:
        return item, Place.LEGACY, target.coordinator_table
    single = CoordinatorStore(clients.dynamodb, target.lease_table, LEASE_TABLE_KEY)
    item = single.get(MIGRATION_KEY)
    if item is not None:
        return item, Place.LEASE_TABLE, target.lease_table
    return None, None, target.lease_table


def layout_of(clients: AwsClients, target: MigrateTarget) -> LayoutReport:
    facts = read_table_facts(
        clients.dynamodb,
        target.lease_table,
        target.coordinator_table,
        target.metrics_table,
        now_s=time.time(),
        reporter_period_s=target.reporter_period_s,
    )
    return describe_layout(facts)


def plan(
    mode: mp.Mode, clients: AwsClients, target: MigrateTarget, *, wait_s: float, now_ms: int
) -> tuple[mp.Plan, LayoutReport]:
    layout = layout_of(clients, target)
    if mode is mp.Mode.STATUS:
        return mp.Plan(), layout
    if mode is mp.Mode.REMOVE_LEGACY_TABLES:
        return mp.plan_remove_legacy_tables(layout), layout
    item, place, table = _find_client_version(clients, target)
    if mode is mp.Mode.ROLLFORWARD:
        return mp.plan_rollforward(item, place, table, now_ms=now_ms), layout
    gsi = LeaseTable3x(clients.dynamodb, target.lease_table).has_owner_index()
    non_lease = sum(n for kind, n in layout.kinds.items() if kind != "LEASE")
    return (
        mp.plan_rollback(
            item,
            place,
            table,
            target.lease_table,
            gsi_present=gsi,
            now_ms=now_ms,
            wait_s=wait_s,
            non_lease_items=non_lease,
        ),
        layout,
    )


def perform(write: mp.Write, clients: AwsClients, sleep: Callable[[float], None]) -> None:
    match write.kind:
        case mp.WriteKind.SET_CLIENT_VERSION:
            key = COORDINATOR_KEY if write.place is Place.LEGACY else LEASE_TABLE_KEY
            store = CoordinatorStore(clients.dynamodb, write.table, key)
            store.update(MIGRATION_KEY, write.attributes, require_equal={"cv": write.expected_cv})
        case mp.WriteKind.WAIT:
            sleep(write.wait_s)
        case mp.WriteKind.DELETE_GSI:
            LeaseTable3x(clients.dynamodb, write.table).delete_owner_index()
        case mp.WriteKind.DELETE_TABLE:
            CoordinatorStore(clients.dynamodb, write.table).delete_table()


def run_migrate(
    mode: mp.Mode,
    clients: AwsClients,
    target: MigrateTarget,
    *,
    dry_run: bool,
    wait_s: float,
    out: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
) -> int:
    """Returns the exit status: 0 done (or nothing to do), 1 refused or a write failed."""
    the_plan, layout = plan(mode, clients, target, wait_s=wait_s, now_ms=now_ms())
    if mode is mp.Mode.STATUS or the_plan.refusal is not None or dry_run:
        for line in layout.lines():
            out(line)
    for note in the_plan.notes:
        out(f"note: {note}")
    if the_plan.refusal is not None:
        out(f"refused: {the_plan.refusal}")
        return ExitStatus.FAILED
    prefix = "would " if dry_run else ""
    for write in the_plan.writes:
        out(f"{prefix}{write.describe()}")
        if dry_run:
            continue
        try:
            perform(write, clients, sleep)
        except LeaseConflict as exc:
            out(f"failed: {exc} (Migration3.0 changed meanwhile; run the command again)")
            return ExitStatus.FAILED
    if not the_plan.writes and mode is not mp.Mode.STATUS:
        out("nothing to do")
    elif dry_run and the_plan.writes:
        out(f"dry run: {len(the_plan.writes)} step(s) not performed")
    return ExitStatus.OK
