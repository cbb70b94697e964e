"""The `kcl-daemon doctor` command: its options, and the report it prints."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kcl_daemon.command_line import doing, dumps_json, load_for, properties_option
from kcl_daemon.config.settings import REQUIRED_FOR_LEASES


@click.command()
@properties_option(
    "The daemon's .properties (or .yaml) file: applicationName/tableName, the stream(s), endpoints."
)
@click.option("--json", "as_json", is_flag=True, help="Print every check's result as JSON.")
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds between the two looks at the table that tell expired leases and a stale leader lock "
    "[default: failoverTimeMillis; 0: one look, expiry not judged].",
)
def doctor(properties: Path, as_json: bool, wait: float | None) -> None:
    """Check an application's setup and state, in order, and say what to do about each problem:
    credentials and region; the stream; the lease table (key schema, GSI, billing); the table layout,
    migration state and versions in the fleet; the IAM actions the configuration needs (tried with
    harmless calls, or listed); leases (expired, unowned, stuck, shards without leases, leases without
    shards); the leader lock; worker-metrics items. Exit status 1 when anything is wrong, else 0."""
    settings = load_for(properties, REQUIRED_FOR_LEASES)
    from kcl_daemon.doctor.reads import run_doctor  # imported here: boto3 only for the AWS commands

    with doing("doctor"):
        report = run_doctor(settings, wait_s=wait)
    click.echo(dumps_json(report.as_json()) if as_json else report.text())
    sys.exit(report.exit_status)
