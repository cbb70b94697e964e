"""The `kcl-daemon spark-sync` command: hand a stopped Spark query's checkpoints over to the daemons."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kcl_daemon.command_line import doing, refuse
from kcl_daemon.errors import ExitStatus


@click.command("spark-sync")
@click.option(
    "--checkpoint",
    required=True,
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="The stopped Spark query's checkpointLocation (a local or mounted directory).",
)
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="The Kinesis source's options, as the query had them (repeatable; leaseTableName is required).",
)
@click.option("--source-index", default=0, show_default=True, type=click.IntRange(min=0))
def spark_sync(checkpoint: Path, options: tuple[str, ...], source_index: int) -> None:
    """Write a stopped Spark query's exact final checkpoints into the KCL lease table and release its
    leases, so daemons started next continue exactly where Spark stopped (see README, Spark)."""
    from kcl_daemon.spark.handover import sync_lease_table

    parsed: dict[str, str] = {}
    for pair in options:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            refuse(f"--option {pair!r}: expected KEY=VALUE")
        parsed[key.strip()] = value
    with doing(failures=(ValueError, OSError)):
        result = sync_lease_table(checkpoint, parsed, source_index=source_index)
    for shard, checkpoint_text in sorted(result.written.items()):
        click.echo(f"{shard}: checkpoint {checkpoint_text}")
    for shard, why in sorted(result.refused.items()):
        click.echo(f"{shard}: not written ({why})")
    for shard in result.children_created:
        click.echo(f"{shard}: child lease created")
    click.echo(f"{len(result.released)} lease(s) released")
    if result.refused:
        sys.exit(ExitStatus.FAILED)
