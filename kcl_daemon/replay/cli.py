"""The `kcl-daemon replay` command: its options, and the report it prints."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click
import orjson

from kcl_daemon.command_line import PROPERTIES_HELP, load_for, properties_option
from kcl_daemon.core.sequence import ExtendedSequenceNumber, InvalidSequenceNumber
from kcl_daemon.errors import ExitStatus
from kcl_daemon.replay.command import run_replay
from kcl_daemon.replay.input import InjectedFailure, parse_injected_failure, read_records_file
from kcl_daemon.replay.report import report_json, report_lines


def _parse_failures(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> list[InjectedFailure]:
    try:
        return [parse_injected_failure(v) for v in values]
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _parse_checkpoint(_ctx: click.Context, _param: click.Parameter, value: str) -> ExtendedSequenceNumber:
    seq, _, sub = value.partition("/")
    try:
        return ExtendedSequenceNumber(seq, int(sub) if sub else 0)
    except (InvalidSequenceNumber, ValueError) as exc:
        raise click.BadParameter(f"{value!r}: {exc}") from None


@click.command("replay")
@properties_option(PROPERTIES_HELP)
@click.option(
    "--records",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="JSON Lines file: one record per line (text or base64 data, partitionKey, ...).",
)
@click.option(
    "--shard-id",
    default="shardId-000000000000",
    show_default=True,
    help="Shard for records that do not name one.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1, 10000),
    default=None,
    help="Records per processRecords message  [default: maxRecords from the properties]",
)
@click.option(
    "--checkpoint",
    "initial_checkpoint",
    default="TRIM_HORIZON",
    show_default=True,
    callback=_parse_checkpoint,
    help="The checkpoint to start from, as if read from the lease (SEQ or SEQ/SUB).",
)
@click.option(
    "--fail-checkpoint",
    "failures",
    multiple=True,
    callback=_parse_failures,
    metavar="ERROR[@N]",
    help="Answer a checkpoint attempt with this Java error (the Nth attempt, or the next one). Repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def replay(
    properties: Path,
    records: Path,
    shard_id: str,
    batch_size: int | None,
    initial_checkpoint: ExtendedSequenceNumber,
    failures: list[InjectedFailure],
    as_json: bool,
) -> None:
    """Run the configured record processor over records from a file, without AWS.

    Each shard gets its own child and the daemon's full protocol and supervision; the shard ends
    with shardEnded. Prints the checkpoints the processor made. Exits 0 when every child ended its
    shard cleanly at SHARD_END (or answered a lease loss simulated with --fail-checkpoint
    ShutdownException), 1 otherwise, 2 on bad input.
    """
    settings = load_for(properties)
    shards = read_records_file(records, shard_id)
    reports = asyncio.run(
        run_replay(
            settings,
            shards,
            batch_size=batch_size or min(settings.max_records, 10000),
            initial_checkpoint=initial_checkpoint,
            failures=failures,
        )
    )
    if as_json:
        click.echo(orjson.dumps([report_json(r) for r in reports], option=orjson.OPT_INDENT_2).decode())
    else:
        for report in reports:
            click.echo("\n".join(report_lines(report)))
        clean = sum(r.ended_cleanly for r in reports)
        click.echo(f"summary: {len(reports)} shard(s), {clean} ended cleanly")
    sys.exit(ExitStatus.OK if all(r.ended_cleanly for r in reports) else ExitStatus.FAILED)
