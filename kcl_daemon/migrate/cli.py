"""The `kcl-daemon migrate` command: its modes and options."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kcl_daemon.command_line import doing, load_for, properties_option
from kcl_daemon.config.settings import REQUIRED_FOR_LEASES


@click.command()
@click.argument("mode", type=click.Choice(["status", "rollback", "rollforward", "remove-legacy-tables"]))
@properties_option("The daemon's .properties (or .yaml) file: applicationName or tableName, endpoints.")
@click.option("--dry-run", is_flag=True, help="Print every write it would make and make none.")
@click.option(
    "--gsi-wait-seconds",
    type=click.FloatRange(min=0),
    default=120.0,
    show_default=True,
    help="rollback: how long to wait between rolling Migration3.0 back and deleting the GSI (Java: 120).",
)
def migrate(mode: str, properties: Path, dry_run: bool, gsi_wait_seconds: float) -> None:
    """KCL 3.x migrations of the application's tables (contract §5.6, §9.2).

    \b
    status                show the layout, the table-migration and client-version state, the leader
                          lock and stale legacy tables (writes nothing)
    rollback              Migration3.0 back to CLIENT_VERSION_2X, then delete the GSI (as Java's
                          KclMigrationTool.py --mode rollback)
    rollforward           Migration3.0 from CLIENT_VERSION_2X to CLIENT_VERSION_UPGRADE_FROM_2X
    remove-legacy-tables  delete <app>-CoordinatorState and <app>-WorkerMetricStats once the table
                          migration is COMPLETE

    Exits 0 when done (or nothing was to do), 1 when refused or a write failed, 2 on a bad file.
    """
    settings = load_for(properties, REQUIRED_FOR_LEASES)
    from kcl_daemon.migrate.command import migrate_from_settings  # imported here: boto3 only for AWS commands

    with doing(f"migrate {mode}"):
        status = migrate_from_settings(
            settings, mode, dry_run=dry_run, wait_s=gsi_wait_seconds, out=click.echo
        )
    sys.exit(status)
