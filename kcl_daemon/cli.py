"""The `kcl-daemon` command line (click). The only module that prints to stdout.

Errors become exit statuses in one place, :func:`exit_on_errors`; the statuses themselves are
:class:`kcl_daemon.errors.ExitStatus`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import orjson

from kcl_daemon.config import report
from kcl_daemon.config.secrets import mask_url_password
from kcl_daemon.config.settings import (
    REQUIRED_FOR_LEASES,
    REQUIRED_FOR_REPLAY,
    REQUIRED_FOR_RUN,
    Requirement,
    Settings,
    load_settings,
)
from kcl_daemon.config.validate import executable_warnings
from kcl_daemon.core.sequence import ExtendedSequenceNumber, InvalidSequenceNumber
from kcl_daemon.errors import ConfigError, ExitStatus, KclError, RecordsFileError
from kcl_daemon.log_setup import configure_logging
from kcl_daemon.replay.command import ShardReport, run_replay
from kcl_daemon.replay.input import InjectedFailure, parse_injected_failure, read_records_file
from kcl_daemon.stopping import StoppedAtOnce, exit_promptly

F = TypeVar("F", bound=Callable[..., Any])


def _fail(message: str, code: ExitStatus = ExitStatus.CONFIG) -> NoReturn:
    click.echo(f"kcl-daemon: {mask_url_password(message)}", err=True)
    sys.exit(code)


def _print_problems(problems: tuple[str, ...], warnings: tuple[str, ...] = ()) -> None:
    click.echo(f"kcl-daemon: invalid configuration ({len(problems)} problem(s)):", err=True)
    for problem in problems:
        click.echo(f"  - {mask_url_password(problem)}", err=True)
    for warning in warnings:
        click.echo(f"kcl-daemon: warning: {mask_url_password(warning)}", err=True)


def _path_warnings(settings: Settings) -> list[str]:
    where = settings.sources.get("executableName", "executableName")
    return executable_warnings(settings.executable, where)


@contextlib.contextmanager
def exit_on_errors(
    doing: str | None = None,
    *,
    failures: tuple[type[Exception], ...] = (),
    older: frozenset[threading.Thread] = frozenset(),
) -> Iterator[None]:
    """The one mapping from the project's errors to exit statuses, for every command.

    A :class:`ConfigError` lists every problem (and warning) and exits ``CONFIG``; a bad input file
    (:class:`RecordsFileError`) exits ``CONFIG`` naming its line; any other :class:`KclError` (and the
    command's own ``failures``) exits ``FAILED`` with ``doing`` in front of the message; a second signal
    (:class:`StoppedAtOnce`) exits ``INTERRUPTED`` without waiting for I/O threads (``older``: the
    threads that are not the daemon's). Passwords in URLs are masked in all of them.
    """
    try:
        yield
    except ConfigError as exc:
        _print_problems(exc.problems, exc.warnings)
        sys.exit(ExitStatus.CONFIG)
    except RecordsFileError as exc:
        _fail(str(exc), ExitStatus.CONFIG)
    except StoppedAtOnce as exc:
        click.echo(f"kcl-daemon: {exc.args[0]}", err=True)
        exit_promptly(ExitStatus.INTERRUPTED, older=older)
    except KclError as exc:
        _fail(f"{doing}: {exc}" if doing else str(exc), ExitStatus.FAILED)
    except Exception as exc:
        if not isinstance(exc, failures):
            raise
        _fail(f"{doing}: {exc}" if doing else str(exc), ExitStatus.FAILED)


def _load(path: Path, required: tuple[Requirement, ...] = REQUIRED_FOR_REPLAY) -> Settings:
    """Load for a command (``required``: what it needs); on any problem print them all and exit 2."""
    with exit_on_errors():
        settings = load_settings(path, required=required)
    for warning in (*settings.warnings, *_path_warnings(settings)):
        click.echo(f"kcl-daemon: warning: {warning}", err=True)
    return settings


_PROPERTIES_HELP = "The daemon's .properties (or .yaml) file; executableName names the processor."


def _properties_option(help_text: str, *, required: bool = True) -> Callable[[F], F]:
    """``--properties FILE``, also spelled ``--properties-file`` as the Java daemon does."""
    return click.option(
        "--properties",
        "--properties-file",
        "properties",
        required=required,
        type=click.Path(path_type=Path, dir_okay=False),
        help=help_text,
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
@_properties_option(f"{_PROPERTIES_HELP} Without a command: run the daemon (like `run`).", required=False)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
@click.option("--log-format", default="text", show_default=True, type=click.Choice(["text", "json"]))
@click.version_option(package_name="kcl-daemon")
@click.pass_context
def main(ctx: click.Context, properties: Path | None, log_level: str, log_format: str) -> None:
    """kcl-daemon: run Kinesis record processors written in any language (a MultiLangDaemon replacement).

    \b
    kcl-daemon --properties app.properties        run the daemon (same as `run`)
    kcl-daemon run --local --properties app.properties
                                                  run it on an embedded Kinesis + DynamoDB
    kcl-daemon check-config --properties app.properties
    kcl-daemon leases --properties app.properties [--json]
    kcl-daemon migrate status --properties app.properties
                                                  KCL 3.x migrations (also rollback, rollforward,
                                                  remove-legacy-tables; --dry-run)
    kcl-daemon doctor --properties app.properties [--json]
    kcl-daemon checkpoint show|set --properties app.properties ...
    kcl-daemon replay --properties app.properties --records records.jsonl
    kcl-daemon simulate --shards 500 --workers 200 --scenario scale-out
                                                  compare lease balancing policies (no AWS)
    """
    configure_logging(log_level, log_format)
    if ctx.invoked_subcommand is not None:
        if properties is not None:
            raise click.UsageError(
                "put --properties after the command name (kcl-daemon run --properties ...)"
            )
        return
    if properties is None:
        click.echo(ctx.get_help())
        ctx.exit(ExitStatus.CONFIG)
    ctx.invoke(run, properties=properties)


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


@main.command()
@_properties_option(_PROPERTIES_HELP)
@click.option(
    "--local",
    is_flag=True,
    help="Use an embedded Kinesis + DynamoDB on 127.0.0.1 (moto) with the stream created and a sample "
    "producer: no AWS account, no network. Endpoints and credentials in the file are ignored.",
)
@click.option(
    "--worker-id", default=None, help="Lease owner id for this process  [default: workerId, or host:random]"
)
@click.option(
    "--status-interval",
    type=click.FloatRange(min=0.5),
    default=None,
    help="Seconds between progress lines  [default: 2 with --local, else 30]",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus metrics on this port (0: any free port; the URL is logged).",
)
@click.option(
    "--metrics-host", default="127.0.0.1", show_default=True, help="Address the metrics endpoint binds."
)
@click.option(
    "--otlp-endpoint",
    default=None,
    metavar="URL",
    help="Push OpenTelemetry metrics over OTLP/HTTP here (e.g. http://127.0.0.1:4318; extra `otel`).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 16),
    default=None,
    help="With --local: run a fleet of N daemons on the embedded backend and show the live lease view.",
)
@click.option(
    "--kill-after",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="With --workers: SIGKILL one worker after this many seconds to watch a takeover (0: never).",
)
@click.option("--refreshes", type=click.IntRange(min=1), default=None, hidden=True)
def run(
    properties: Path,
    local: bool,
    worker_id: str | None,
    status_interval: float | None,
    metrics_port: int | None,
    metrics_host: str,
    otlp_endpoint: str | None,
    workers: int | None,
    kill_after: float,
    refreshes: int | None,
) -> None:
    """Run the daemon: take leases, read the stream, feed every shard's records to its own child process.

    Stops gracefully on SIGTERM, SIGHUP or Ctrl-C: each child gets shutdownRequested and may checkpoint,
    then the leases are released so other workers take them at once. A second signal kills the children
    and stops at once. Exit status: 0 after a graceful stop, 1 if the worker could not start or go on,
    2 for a bad configuration, 130 after a second signal.
    """
    settings = _load(properties, REQUIRED_FOR_RUN)
    if workers is not None:
        if not local:
            _fail("--workers goes with --local (a fleet on the embedded backend)")
        from kcl_daemon.local.fleet import run_local_fleet

        with exit_on_errors():
            code = run_local_fleet(
                settings,
                properties,
                workers,
                sys.stdout,
                every_s=status_interval or 2.0,
                kill_after_s=kill_after or None,
                refreshes=refreshes,
                clear=sys.stdout.isatty(),
            )
        sys.exit(code)
    from kcl_daemon.metrics.runtime import MetricsOptions
    from kcl_daemon.run import run_from_settings  # imported here: boto3 only for the AWS commands

    interval = status_interval if status_interval is not None else (2.0 if local else 30.0)
    options = MetricsOptions(metrics_port, metrics_host, otlp_endpoint)
    older = frozenset(threading.enumerate())
    with exit_on_errors():
        code = run_from_settings(
            settings, local=local, worker_id=worker_id, status_every_s=interval, metrics_options=options
        )
    exit_promptly(code, older=older)  # an I/O thread still blocked in a hanging call must not delay the exit


@main.command()
@_properties_option(
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
    settings = _load(properties, REQUIRED_FOR_LEASES)
    if (html is not None or metrics_url is not None) and not watch:
        _fail("--html and --metrics-url go with --watch")
    if watch:
        from kcl_daemon.inspection.watch import watch_leases

        with (
            exit_on_errors(f"cannot watch {metrics_url or settings.lease_table_name}"),
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
    from kcl_daemon.inspection.report import report_json, report_text
    from kcl_daemon.run import inspect_leases  # imported here: boto3 only for the AWS commands

    with exit_on_errors(f"cannot read lease table {settings.lease_table_name}"):
        result = inspect_leases(settings, check_expiry=check_expiry)
    if as_json:
        click.echo(dumps_json(report_json(result)))
    else:
        click.echo(report_text(result))


@main.command()
@click.argument("mode", type=click.Choice(["status", "rollback", "rollforward", "remove-legacy-tables"]))
@_properties_option("The daemon's .properties (or .yaml) file: applicationName or tableName, endpoints.")
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
    settings = _load(properties, REQUIRED_FOR_LEASES)
    from kcl_daemon.run import migrate_from_settings  # imported here: boto3 only for the AWS commands

    with exit_on_errors(f"migrate {mode}"):
        status = migrate_from_settings(
            settings, mode, dry_run=dry_run, wait_s=gsi_wait_seconds, out=click.echo
        )
    sys.exit(status)


def dumps_json(payload: object) -> str:
    """Indented JSON; integers beyond 64 bits (a corrupt ``leaseCounter``) are written exactly."""
    try:
        return orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode()
    except TypeError:  # orjson holds 64-bit integers only
        return json.dumps(payload, indent=2, ensure_ascii=False, default=str)


@main.command("deregister-consumer")
@_properties_option(
    "The daemon's .properties (or .yaml) file: fanoutConfig.consumerArn, or streamName/streamArn with "
    "fanoutConfig.consumerName or applicationName; endpoints."
)
def deregister_consumer_command(properties: Path) -> None:
    """Deregister the enhanced fan-out stream consumer the configuration names (the daemon never does
    it by itself: other workers of the application share the consumer). Exit 0 also when none exists."""
    settings = _load(properties, ())
    from kcl_daemon.retrieval.efo_consumer import deregister_consumer  # boto3 only for the AWS commands

    with exit_on_errors("cannot deregister the stream consumer"):
        what, existed = deregister_consumer(settings)
    click.echo(f"deregistered stream consumer {what}" if existed else f"no stream consumer {what}")


@main.command()
@_properties_option(
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
    settings = _load(properties, REQUIRED_FOR_LEASES)
    from kcl_daemon.doctor.reads import run_doctor  # imported here: boto3 only for the AWS commands

    with exit_on_errors("doctor"):
        report = run_doctor(settings, wait_s=wait)
    click.echo(dumps_json(report.as_json()) if as_json else report.text())
    sys.exit(report.exit_status)


@main.group()
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
@_properties_option("The daemon's .properties (or .yaml) file: applicationName/tableName, endpoints.")
@_selection_options
@click.option("--json", "as_json", is_flag=True, help="Print the checkpoints as JSON.")
def checkpoint_show(
    properties: Path, shards: tuple[str, ...], all_leases: bool, stream: str | None, as_json: bool
) -> None:
    """Show the checkpoint of the given shards (default: all), with owner, counter and the last change
    made with `checkpoint set` (who, when, from, to)."""
    settings = _load(properties, REQUIRED_FOR_LEASES)
    from kcl_daemon.checkpoint_tool.command import CheckpointTool, Selection, audit_of

    with exit_on_errors(f"cannot read lease table {settings.lease_table_name}"):
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
@_properties_option(
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
        _fail("name the shards with --shard, or use --all (not both)")
    if (to == "AT_TIMESTAMP") != (timestamp is not None):
        _fail("--timestamp goes with --to AT_TIMESTAMP, and AT_TIMESTAMP needs it")
    settings = _load(properties, REQUIRED_FOR_LEASES)
    from kcl_daemon.checkpoint_tool.command import (
        CheckpointTool,
        Selection,
        SetOptions,
        Target,
        operator,
    )

    options = SetOptions(handoff, dry_run, reason, by or operator(), wait)
    with exit_on_errors("checkpoint set"):
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


@main.command("replay")
@_properties_option(_PROPERTIES_HELP)
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
    settings = _load(properties)
    with exit_on_errors():
        shards = read_records_file(records, shard_id)
    older = frozenset(threading.enumerate())
    with exit_on_errors(older=older):
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
        click.echo(orjson.dumps([_report_json(r) for r in reports], option=orjson.OPT_INDENT_2).decode())
    else:
        for report in reports:
            _print_report(report)
        clean = sum(r.ended_cleanly for r in reports)
        click.echo(f"summary: {len(reports)} shard(s), {clean} ended cleanly")
    sys.exit(ExitStatus.OK if all(r.ended_cleanly for r in reports) else ExitStatus.FAILED)


def _verdict(report: ShardReport) -> str:
    outcome = report.outcome
    if report.ended_cleanly and report.simulated_lease_loss:
        return "lease lost (simulated by --fail-checkpoint ShutdownException); the child answered leaseLost"
    if report.ended_cleanly:
        return "ended cleanly at SHARD_END"
    if outcome.parked_because:
        return f"PARKED: {outcome.parked_because}"
    reason = outcome.reason.name.lower() if outcome.reason else "none"
    return (
        f"did not end the shard (state {outcome.state.value}, reason {reason}, "
        f"checkpoint {outcome.checkpoint})"
    )


def _print_report(report: ShardReport) -> None:
    stats = report.outcome.stats
    click.echo(f"shard {report.outcome.shard_id}: {_verdict(report)}")
    for event in report.history:
        suffix = f"  -> {event.error}" if event.error else ""
        click.echo(f"  checkpoint {event.target}{suffix}")
    if not report.history:
        click.echo("  no checkpoints")
    click.echo(
        f"  {report.records_in_file} record(s) in the file, {stats.records_delivered} delivered in "
        f"{stats.batches} batch(es); child started {stats.child_starts} time(s), "
        f"failed {stats.child_failures}"
    )
    failures = stats.failure_messages
    if len(failures) > 2:
        click.echo(f"  ({len(failures) - 2} earlier failure(s) not shown; --json lists them all)")
    for message in failures[-2:]:
        click.echo(f"  failure: {message}")


def _report_json(report: ShardReport) -> dict[str, object]:
    outcome = report.outcome
    return {
        "shardId": outcome.shard_id,
        "endedCleanly": report.ended_cleanly,
        "simulatedLeaseLoss": report.simulated_lease_loss,
        "state": outcome.state.value,
        "reason": outcome.reason.name if outcome.reason else None,
        "checkpoint": str(outcome.checkpoint),
        "checkpoints": [
            {
                "sequenceNumber": e.target.sequence_number,
                "subSequenceNumber": e.target.sub_sequence_number,
                "error": e.error,
            }
            for e in report.history
        ],
        "recordsInFile": report.records_in_file,
        "recordsDelivered": outcome.stats.records_delivered,
        "batches": outcome.stats.batches,
        "childStarts": outcome.stats.child_starts,
        "childFailures": outcome.stats.child_failures,
        "failures": outcome.stats.failure_messages,
        "parkedBecause": outcome.parked_because,
    }


_REQUIRED_FOR: dict[str, tuple[Requirement, ...]] = {
    "run": REQUIRED_FOR_RUN,
    "leases": REQUIRED_FOR_LEASES,
    "replay": REQUIRED_FOR_REPLAY,
}


@main.group("dead-letters")
def dead_letters() -> None:
    """Look at the records poisonRecordPolicy DEAD_LETTER set aside, and send them back (docs/failures.md).

    The destination is deadLetterDestination from the properties, or --destination. Nothing is removed.
    """


def _destination_options(f: F) -> F:
    f = click.option("--destination", default=None, help="Instead of deadLetterDestination (sqs://, ...).")(f)
    return _properties_option("The daemon's .properties (its deadLetterDestination, region, endpoints).")(f)


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

    settings = _load(properties, required=())
    with exit_on_errors():
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

    settings = _load(properties, required=())
    with exit_on_errors():
        chosen = tool.select(tool.load(settings, destination).letters, shard, sequence, sub)
    if not chosen:
        _fail("no dead letter matches", ExitStatus.FAILED)
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

    settings = _load(properties, required=())
    with exit_on_errors():
        chosen = tool.select(tool.load(settings, destination).letters, shard, sequence, sub)
    if not chosen:
        _fail("no dead letter matches", ExitStatus.FAILED)
    if processor:
        if settings.executable is None:
            _fail("--processor needs executableName in the properties")
        if dry_run:
            click.echo(f"would feed {len(chosen)} record(s) to {' '.join(settings.executable)}")
            return
        with exit_on_errors():
            reports = tool.replay_to_processor(settings, chosen, batch_size=min(settings.max_records, 10000))
        for report in reports:
            _print_report(report)
        sys.exit(ExitStatus.OK if all(r.ended_cleanly for r in reports) else ExitStatus.FAILED)
    stream = to_stream or settings.effective_stream_name
    if stream is None:
        _fail("no stream: pass --to-stream or set streamName")
    with exit_on_errors():
        for line in tool.replay_to_stream(settings, chosen, stream, dry_run=dry_run):
            click.echo(line)


@main.command("check-config")
@_properties_option("The daemon's .properties (or .yaml) file.")
@click.option(
    "--for",
    "command",
    type=click.Choice(sorted(_REQUIRED_FOR)),
    default="run",
    show_default=True,
    help="Check the keys this command needs.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the configuration as JSON.")
@click.option(
    "--table-state",
    is_flag=True,
    help="Also read the application's tables (read-only) and say which layout and table-migration state "
    "they are in, with a warning where the fleet's versions cannot share them.",
)
def check_config(properties: Path, command: str, as_json: bool, table_state: bool) -> None:
    """Print the effective configuration: every key with its value and where it came from.

    Exits 0 when the file is valid for the command (--for), 2 listing every problem otherwise.
    Nothing is started, and AWS is contacted only with --table-state (exit 1 when the table cannot be read).
    """
    # boto3 lives under kcl_daemon.aws; imported here so the other commands do not pay for it.
    from kcl_daemon.aws.clients import boto3_defaults

    try:
        settings = load_settings(properties, required=_REQUIRED_FOR[command])
    except ConfigError as exc:
        if as_json:
            payload = {
                "file": str(properties),
                "for": command,
                "valid": False,
                "problems": exc.problems,
                "warnings": exc.warnings,
            }
            click.echo(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode())
        else:
            _print_problems(exc.problems, exc.warnings)
        sys.exit(ExitStatus.CONFIG)
    if command != "leases":
        settings = dataclasses.replace(settings, warnings=(*settings.warnings, *_path_warnings(settings)))
    rows = report.rows(settings, boto3_defaults())
    derived = report.derived(settings)
    layout = None
    if table_state:
        from kcl_daemon.run import table_layout

        with exit_on_errors(f"cannot read the tables of {settings.lease_table_name}", failures=(ValueError,)):
            layout = table_layout(settings)
    if as_json:
        payload = {
            "file": str(properties),
            "for": command,
            "valid": True,
            "keys": [
                {"key": r.key, "field": r.field, "value": r.value, "source": r.source, "note": r.note or None}
                for r in rows
            ],
            "derived": derived,
            "warnings": settings.warnings,
            "problems": [],
            "tableState": None if layout is None else layout.as_json(),
        }
        click.echo(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode())
        return
    width = max(len(r.key) for r in rows)
    value_width = min(40, max(len(r.text) for r in rows))
    click.echo(f"{properties}: valid for {command}")
    for r in rows:
        note = f"  ({r.note})" if r.note else ""
        click.echo(f"  {r.key:<{width}}  {r.text:<{value_width}}  [{r.source}]{note}")
    click.echo("derived:")
    for name, value in derived.items():
        click.echo(f"  {name}: {value}")
    if layout is not None:
        click.echo(f"table state of {settings.lease_table_name}:")
        for line in layout.lines():
            click.echo(f"  {line}")
    for warning in settings.warnings:
        click.echo(f"warning: {warning}")


@main.command()
@click.option("--shards", default=500, show_default=True, type=click.IntRange(min=1), help="Shards (leases).")
@click.option("--workers", default=200, show_default=True, type=click.IntRange(min=1), help="Workers.")
@click.option(
    "--zones", default=2, show_default=True, type=click.IntRange(min=1), help="Zones (or clusters)."
)
@click.option(
    "--scenario",
    "scenarios",
    multiple=True,
    help="Scenario (repeatable; default: all but scale): "
    "cold, scale-out, crash, leader-crash, rolling, hot, zone-loss, reshard, scale.",
)
@click.option(
    "--policy",
    "policies",
    multiple=True,
    help="Policy (repeatable; default: 2.x, variance, cooperative): also count (Java's LEASE_COUNT_BASED) "
    "and variance-1814 (Java's variance decider with KCL #1814's fixed-width threshold).",
)
@_properties_option(
    "Take failoverTimeMillis, maxLeasesForWorker, leaseAssignmentIntervalMillis, restartGraceMillis and "
    "maxHandoffsPerWorker from this file.",
    required=False,
)
@click.option("--failover-ms", type=click.IntRange(min=100), help="failoverTimeMillis (overrides the file).")
@click.option("--grace-ms", type=click.IntRange(min=0), help="restartGraceMillis (overrides the file).")
@click.option("--max-handoffs", type=click.IntRange(min=1), help="maxHandoffsPerWorker (overrides the file).")
@click.option("--seed", default=0, show_default=True, type=int, help="Random seed (same seed, same result).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option(
    "--plot", type=click.Path(path_type=Path, dir_okay=False), help="Write a timeline picture (.html)."
)
def simulate(
    shards: int,
    workers: int,
    zones: int,
    scenarios: tuple[str, ...],
    policies: tuple[str, ...],
    properties: Path | None,
    failover_ms: int | None,
    grace_ms: int | None,
    max_handoffs: int | None,
    seed: int,
    as_json: bool,
    plot: Path | None,
) -> None:
    """Compare lease-balancing policies on a simulated fleet (capacity planning; no AWS).

    Every policy runs the real decision code (the 2.x taker, Java's variance-based decider, this
    project's assignor) through the same seeded scenario; the table shows time to balance, lease moves
    against their lower bound, hand-offs, moves that risk duplicates, unserved lease-seconds, leases per
    worker and per zone, DynamoDB units per lease-hour and the decider's time per round.
    """
    from kcl_daemon.sim import report as sim_report
    from kcl_daemon.sim.model import FleetConfig
    from kcl_daemon.sim.policies import MORE_POLICY_NAMES, POLICY_NAMES
    from kcl_daemon.sim.scenarios import SCENARIOS, Size

    if plot is not None and plot.suffix.lower() != ".html":
        _fail(f"--plot {plot}: only .html pictures are supported")
    for name in scenarios:
        if name not in SCENARIOS:
            _fail(f"--scenario {name!r}: choose from {', '.join(SCENARIOS)}")
    for name in policies:
        if name not in (*POLICY_NAMES, *MORE_POLICY_NAMES):
            _fail(f"--policy {name!r}: choose from {', '.join((*POLICY_NAMES, *MORE_POLICY_NAMES))}")
    fleet = FleetConfig()
    if properties is not None:
        settings = _load(properties, ())
        fleet = FleetConfig(
            failover_s=settings.failover_s,
            assignment_interval_s=settings.lease_assignment_interval_s,
            max_leases_for_worker=settings.max_leases_for_worker,
            restart_grace_s=settings.restart_grace_s,
            max_handoffs_per_worker=settings.max_handoffs_per_worker,
        )
    if failover_ms is not None:
        fleet = dataclasses.replace(fleet, failover_s=failover_ms / 1000)
    if grace_ms is not None:
        fleet = sim_report.with_grace(fleet, grace_ms / 1000)
    if max_handoffs is not None:
        fleet = dataclasses.replace(fleet, max_handoffs_per_worker=max_handoffs)
    chosen = scenarios or tuple(name for name in SCENARIOS if name != "scale")
    results = sim_report.compare(chosen, policies or POLICY_NAMES, Size(shards, workers, zones), fleet, seed)
    if plot is not None:
        plot.write_text(sim_report.html_page(results), encoding="utf-8")
    if as_json:
        click.echo(orjson.dumps(sim_report.to_json(results), option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(sim_report.table(results))


@main.command("spark-sync")
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
            _fail(f"--option {pair!r}: expected KEY=VALUE")
        parsed[key.strip()] = value
    with exit_on_errors(failures=(ValueError, OSError)):
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
