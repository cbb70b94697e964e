"""The `kcl-daemon leases` command: its options, the report or the live view."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click

from kcl_daemon.command_line import doing, dumps_json, load_for, properties_option, refuse
from kcl_daemon.config.settings import REQUIRED_FOR_LEASES


@click.command()
@properties_option(
    "The daemon's .properties (or .yaml) file: applicationName/tableName, streamName, endpoints."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--check-expiry",
    is_flag=True,
    help="Scan twice, failoverTimeMillis apart, to see which owned leases nobody renews (expired).",
)
@click.option(
    "--watch", is_flag=True, help="Redraw the table and the per-worker/per-zone spread until Ctrl-C."
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2),
    default=2.0,
    show_default=True,
    help="Seconds between redraws with --watch.",
)
@click.option(
    "--html",
    "--plot",
    "html",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --watch: keep FILE up to date with a plot of leases per worker over time.",
)
@click.option(
    "--metrics-url",
    default=None,
    metavar="URL",
    help="With --watch: read the fleet figures from a daemon's metrics endpoint instead of the table.",
)
@click.option("--refreshes", type=click.IntRange(min=1), default=None, hidden=True)
def leases(
    properties: Path,
    as_json: bool,
    check_expiry: bool,
    watch: bool,
    interval: float,
    html: Path | None,
    metrics_url: str | None,
    refreshes: int | None,
) -> None:
    """Show the lease table: every lease with owner, counter, checkpoint and parents, then leases per
    worker and per cluster (the worker id up to leaseClusterSeparator), unclaimed and expired leases,
    and shards without a lease. --watch redraws it (and --html plots it over time) to watch a rebalance."""
    settings = load_for(properties, REQUIRED_FOR_LEASES)
    if (html is not None or metrics_url is not None) and not watch:
        refuse("--html and --metrics-url go with --watch")
    if watch:
        from kcl_daemon.inspection.watch import watch_leases

        with (
            doing(f"cannot watch {metrics_url or settings.lease_table_name}"),
            contextlib.suppress(KeyboardInterrupt),
        ):
            watch_leases(
                settings,
                sys.stdout,
                every_s=interval,
                html=html,
                metrics_url=metrics_url,
                refreshes=refreshes,
                clear=sys.stdout.isatty(),
            )
        return
    from kcl_daemon.inspection.command import inspect_leases  # imported here: boto3 only for AWS commands
    from kcl_daemon.inspection.report import report_json, report_text

    with doing(f"cannot read lease table {settings.lease_table_name}"):
        result = inspect_leases(settings, check_expiry=check_expiry)
    if as_json:
        click.echo(dumps_json(report_json(result)))
    else:
        click.echo(report_text(result))
