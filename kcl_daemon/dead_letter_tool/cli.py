"""The `kcl-daemon dead-letters list|show|replay` commands: their options, and what they print."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from kcl_daemon.command_line import doing, dumps_json, load_for, properties_option, refuse
from kcl_daemon.errors import ExitStatus

F = TypeVar("F", bound=Callable[..., Any])


@click.group("dead-letters")
def dead_letters() -> None:
    """Look at the records poisonRecordPolicy DEAD_LETTER set aside, and send them back (docs/failures.md).

    The destination is deadLetterDestination from the properties, or --destination. Nothing is removed.
    """


def _destination_options(f: F) -> F:
    f = click.option("--destination", default=None, help="Instead of deadLetterDestination (sqs://, ...).")(f)
    return properties_option("The daemon's .properties (its deadLetterDestination, region, endpoints).")(f)


def _letter_options(f: F) -> F:
    f = click.option("--sub", "sub", type=int, default=None, help="Only this sub-sequence number.")(f)
    f = click.option("--sequence", default=None, help="Only the record with this sequence number.")(f)
    return click.option("--shard", default=None, help="Only this shard's dead letters.")(f)


@dead_letters.command("list")
@_destination_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON (without payloads).")
def dead_letters_list(properties: Path, destination: str | None, as_json: bool) -> None:
    """List the dead letters per shard (sequence number, failure, attempts, when; never a payload)."""
    from kcl_daemon.dead_letter_tool import command as tool

    settings = load_for(properties, required=())
    with doing():
        found = tool.load(settings, destination)
    click.echo(dumps_json(tool.listing_json(found)) if as_json else tool.listing(found))


@dead_letters.command("show")
@_destination_options
@_letter_options
def dead_letters_show(
    properties: Path, destination: str | None, shard: str | None, sequence: str | None, sub: int | None
) -> None:
    """Print the selected dead letters as JSON, with the payload (base64) and the failure."""
    from kcl_daemon.dead_letter_tool import command as tool

    settings = load_for(properties, required=())
    with doing():
        chosen = tool.select(tool.load(settings, destination).letters, shard, sequence, sub)
    if not chosen:
        refuse("no dead letter matches", ExitStatus.FAILED)
    for letter in chosen:
        click.echo(dumps_json(letter.to_json()))


@dead_letters.command("replay")
@_destination_options
@_letter_options
@click.option("--to-stream", default=None, help="Put the records on this stream (default: streamName).")
@click.option("--processor", is_flag=True, help="Feed them to executableName locally, as `replay` does.")
@click.option("--dry-run", is_flag=True, help="Say what would be done; do nothing.")
def dead_letters_replay(
    properties: Path,
    destination: str | None,
    shard: str | None,
    sequence: str | None,
    sub: int | None,
    to_stream: str | None,
    processor: bool,
    dry_run: bool,
) -> None:
    """Send the selected dead letters back: onto a stream (new sequence numbers), or through the
    processor locally (--processor). Exits 1 if the processor did not end every shard cleanly."""
    from kcl_daemon.dead_letter_tool import command as tool
    from kcl_daemon.replay.report import report_lines

    settings = load_for(properties, required=())
    with doing():
        chosen = tool.select(tool.load(settings, destination).letters, shard, sequence, sub)
    if not chosen:
        refuse("no dead letter matches", ExitStatus.FAILED)
    if processor:
        if settings.executable is None:
            refuse("--processor needs executableName in the properties")
        if dry_run:
            click.echo(f"would feed {len(chosen)} record(s) to {' '.join(settings.executable)}")
            return
        with doing():
            reports = tool.replay_to_processor(settings, chosen, batch_size=min(settings.max_records, 10000))
        for report in reports:
            click.echo("\n".join(report_lines(report)))
        sys.exit(ExitStatus.OK if all(r.ended_cleanly for r in reports) else ExitStatus.FAILED)
    stream = to_stream or settings.effective_stream_name
    if stream is None:
        refuse("no stream: pass --to-stream or set streamName")
    with doing():
        for line in tool.replay_to_stream(settings, chosen, stream, dry_run=dry_run):
            click.echo(line)
