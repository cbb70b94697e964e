"""The `kcl-daemon checkpoint show|set` commands: their options, and what they print."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from kcl_daemon.command_line import doing, dumps_json, load_for, properties_option, refuse
from kcl_daemon.config.settings import REQUIRED_FOR_LEASES
from kcl_daemon.core.sequence import ExtendedSequenceNumber, InvalidSequenceNumber
from kcl_daemon.errors import ExitStatus

F = TypeVar("F", bound=Callable[..., Any])


@click.group()
def checkpoint() -> None:
    """Show shards' checkpoints, or set them (rewind or skip ahead) without endangering a running fleet.

    \b
    kcl-daemon checkpoint show --properties app.properties [--shard ID ...] [--json]
    kcl-daemon checkpoint set  --properties app.properties --shard ID --to TRIM_HORIZON [--handoff]
    """


def _selection_options(f: F) -> F:
    f = click.option(
        "--stream",
        default=None,
        help="With streamNames: the stream the --shard ids belong to (or --all is limited to).",
    )(f)
    f = click.option("--all", "all_leases", is_flag=True, help="Every lease in the table.")(f)
    return click.option(
        "--shard",
        "shards",
        multiple=True,
        metavar="ID",
        help="A shard id, or a whole lease key (account:stream:epoch:shardId). Repeatable.",
    )(f)


@checkpoint.command("show")
@properties_option("The daemon's .properties (or .yaml) file: applicationName/tableName, endpoints.")
@_selection_options
@click.option("--json", "as_json", is_flag=True, help="Print the checkpoints as JSON.")
def checkpoint_show(
    properties: Path, shards: tuple[str, ...], all_leases: bool, stream: str | None, as_json: bool
) -> None:
    """Show the checkpoint of the given shards (default: all), with owner, counter and the last change
    made with `checkpoint set` (who, when, from, to)."""
    settings = load_for(properties, REQUIRED_FOR_LEASES)
    from kcl_daemon.checkpoint_tool.command import CheckpointTool, Selection, audit_of

    with doing(f"cannot read lease table {settings.lease_table_name}"):
        tool = CheckpointTool.from_settings(settings)
        leases = tool.show(Selection(shards, all_leases, stream))
    rows = [
        {
            "leaseKey": lease.lease_key,
            "leaseOwner": lease.lease_owner,
            "checkpointOwner": lease.checkpoint_owner,
            "leaseCounter": lease.lease_counter,
            "checkpoint": lease.checkpoint.sequence_number,
            "checkpointSubSequenceNumber": lease.checkpoint.sub_sequence_number,
            "lastSet": audit_of(lease),
        }
        for lease in leases
    ]
    if as_json:
        click.echo(dumps_json(rows))
        return
    for row, lease in zip(rows, leases, strict=True):
        audit = row["lastSet"]
        last = ""
        if isinstance(audit, dict):
            last = f"  (set by {audit.get('by')} from {audit.get('from')}, {audit.get('how')})"
        click.echo(
            f"{lease.lease_key}  {lease.checkpoint}  owner {lease.lease_owner or '-'}  "
            f"counter {lease.lease_counter}{last}"
        )


def _parse_target(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    text = value.strip().upper() if value.strip().isalpha() else value.strip()
    if text in ("TRIM_HORIZON", "LATEST", "AT_TIMESTAMP"):
        return text
    seq, _, sub = text.partition("/")
    try:
        ExtendedSequenceNumber(seq, int(sub) if sub else 0)
    except (InvalidSequenceNumber, ValueError) as exc:
        raise click.BadParameter(
            f"{value!r}: TRIM_HORIZON, LATEST, AT_TIMESTAMP or a sequence number (SEQ or SEQ/SUB): {exc}"
        ) from None
    return text


def _parse_timestamp(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime | None:
    if value is None:
        return None
    text = value.strip()
    try:
        if text.replace(".", "", 1).isdigit():
            return datetime.fromtimestamp(float(text), UTC)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise click.BadParameter(
            f"{value!r}: ISO 8601 (2024-05-01T10:00:00Z) or epoch seconds: {exc}"
        ) from None
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    if moment > datetime.now(UTC):
        raise click.BadParameter(f"{value!r} is in the future: Kinesis has no record there yet")
    return moment


@checkpoint.command("set")
@properties_option(
    "The daemon's .properties (or .yaml) file: applicationName/tableName, the stream, endpoints."
)
@_selection_options
@click.option(
    "--to",
    "to",
    required=True,
    callback=_parse_target,
    help="TRIM_HORIZON, LATEST, AT_TIMESTAMP (with --timestamp) or a sequence number (SEQ or SEQ/SUB): "
    "the last record counted as processed.",
)
@click.option(
    "--timestamp",
    callback=_parse_timestamp,
    default=None,
    help="With --to AT_TIMESTAMP: the first record at or after this instant is processed next "
    "(ISO 8601, or epoch seconds).",
)
@click.option(
    "--handoff",
    is_flag=True,
    help="Take leases held by live workers from them first (KCL 3.x: a graceful hand-off, the processor "
    "checkpoints; KCL 2.x: a fenced take), instead of refusing them.",
)
@click.option("--dry-run", is_flag=True, help="Show what would be done; write nothing.")
@click.option("--reason", default=None, help="Why: recorded on the lease and in the log.")
@click.option("--by", default=None, help="Who: recorded on the lease  [default: user@host].")
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds to watch owned leases to tell live owners from dead ones [default: failoverTimeMillis].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def checkpoint_set(
    properties: Path,
    shards: tuple[str, ...],
    all_leases: bool,
    stream: str | None,
    to: str,
    timestamp: datetime | None,
    handoff: bool,
    dry_run: bool,
    reason: str | None,
    by: str | None,
    wait: float | None,
    as_json: bool,
) -> None:
    """Set the checkpoint of some shards (--shard, repeatable) or all (--all).

    Safe by construction: every write is fenced on the lease counter that was read; a lease a live
    worker holds is refused unless --handoff takes it from that worker first; a finished shard
    (SHARD_END) is refused. Each change is logged and recorded on the lease (kclDaemonCheckpointSet).
    Exit status 1 if any lease was refused or not changed.
    """
    if bool(shards) == all_leases:
        refuse("name the shards with --shard, or use --all (not both)")
    if (to == "AT_TIMESTAMP") != (timestamp is not None):
        refuse("--timestamp goes with --to AT_TIMESTAMP, and AT_TIMESTAMP needs it")
    settings = load_for(properties, REQUIRED_FOR_LEASES)
    from kcl_daemon.checkpoint_tool.command import (
        CheckpointTool,
        Selection,
        SetOptions,
        Target,
        operator,
    )

    options = SetOptions(handoff, dry_run, reason, by or operator(), wait)
    with doing("checkpoint set"):
        tool = CheckpointTool.from_settings(settings)
        report = asyncio.run(tool.set(Selection(shards, all_leases, stream), Target(to, timestamp), options))
    if as_json:
        click.echo(
            dumps_json({"dryRun": dry_run, "ok": report.ok, "leases": [o.as_json() for o in report.outcomes]})
        )
    else:
        for line in report.lines():
            click.echo(line)
    sys.exit(ExitStatus.OK if report.ok else ExitStatus.FAILED)
