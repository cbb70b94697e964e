"""`kcl-daemon leases` (and `check-config --table-state`): read the configured application's lease table
and tables' layout, read-only."""

from __future__ import annotations

import asyncio
import functools
import time

from kcl_daemon.aws.clients import AwsClients, build_clients, client_settings_from
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lease_table import DynamoLeaseTable, ScanResult
from kcl_daemon.aws.table_facts import read_table_facts
from kcl_daemon.clock import SystemClock
from kcl_daemon.config.settings import Settings
from kcl_daemon.config.slices import table_names
from kcl_daemon.core.leader.layout import LayoutReport, describe_layout
from kcl_daemon.inspection.stream_shards import configured_shard_lister
from kcl_daemon.inspection.table import LeaseTableReport, inspect_lease_table


def inspect_leases(settings: Settings, *, check_expiry: bool = False) -> LeaseTableReport:
    """The `kcl-daemon leases` report for the configured table (and stream, when one is configured)."""
    table_name = settings.lease_table_name
    if table_name is None:
        raise ValueError("leases needs applicationName or tableName (validate_for_leases)")
    clients = build_clients(client_settings_from(settings))
    names = table_names(settings)
    table = DynamoLeaseTable(
        clients.dynamodb, table_name, heartbeat_table=None if names is None else names.worker_metrics
    )
    kinesis = Kinesis(clients.kinesis)
    leases = settings.leases()

    def scan() -> ScanResult:
        return table.list_leases_and_heartbeats(consistent=True)

    return asyncio.run(
        inspect_lease_table(
            table_name,
            scan,
            list_shards=configured_shard_lister(settings.shards(), clients.kinesis, kinesis),
            clock=SystemClock(),
            expiry_wait_s=leases.failover_s if check_expiry else None,
            cluster_separator=leases.cluster_separator,
            describe_layout=functools.partial(table_layout, settings, clients),
        )
    )


def table_layout(settings: Settings, clients: AwsClients | None = None) -> LayoutReport:
    """The layout and table-migration state of the configured application's tables (read-only)."""
    tables = settings.tables()
    if tables is None:
        raise ValueError("needs applicationName or tableName (validate_for_leases)")
    clients = clients or build_clients(client_settings_from(settings))
    facts = read_table_facts(
        clients.dynamodb,
        tables.lease,
        tables.coordinator_state,
        tables.worker_metrics,
        now_s=time.time(),
        reporter_period_s=settings.leader().worker_metrics_report_s,
    )
    return describe_layout(facts)
