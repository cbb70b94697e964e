"""The `kcl-daemon` command line (click): the command group, the commands that belong to no operator
package (`run`, `check-config`, `deregister-consumer`), and the one mapping from errors to exit statuses.

Each operator command declares and assembles itself in its own package (``doctor.cli``,
``inspection.cli``, ``migrate.cli``, ``checkpoint_tool.cli``, ``dead_letter_tool.cli``, ``replay.cli``,
``sim.cli``, ``spark.cli``) with the shared pieces of :mod:`kcl_daemon.command_line`; this module adds
them to the group. Every command runs inside :func:`exit_on_errors`, the one place errors become exit
statuses (:class:`kcl_daemon.errors.ExitStatus`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import click
import orjson

from kcl_daemon.checkpoint_tool.cli import checkpoint
from kcl_daemon.command_line import PROPERTIES_HELP, doing, load_for, path_warnings, properties_option, refuse
from kcl_daemon.config import report
from kcl_daemon.config.secrets import mask_url_password
from kcl_daemon.config.settings import (
    REQUIRED_FOR_LEASES,
    REQUIRED_FOR_REPLAY,
    REQUIRED_FOR_RUN,
    Requirement,
    load_settings,
)
from kcl_daemon.dead_letter_tool.cli import dead_letters
from kcl_daemon.doctor.cli import doctor
from kcl_daemon.errors import CommandFailed, ConfigError, ExitStatus, KclError, RecordsFileError
from kcl_daemon.inspection.cli import leases
from kcl_daemon.log_setup import configure_logging
from kcl_daemon.migrate.cli import migrate
from kcl_daemon.replay.cli import replay
from kcl_daemon.sim.cli import simulate
from kcl_daemon.spark.cli import spark_sync
from kcl_daemon.stopping import StoppedAtOnce, exit_promptly


def _fail(message: str, code: ExitStatus = ExitStatus.CONFIG) -> NoReturn:
    click.echo(f"kcl-daemon: {mask_url_password(message)}", err=True)
    sys.exit(code)


def _print_problems(problems: tuple[str, ...], warnings: tuple[str, ...] = ()) -> None:
    click.echo(f"kcl-daemon: invalid configuration ({len(problems)} problem(s)):", err=True)
    for problem in problems:
        click.echo(f"  - {mask_url_password(problem)}", err=True)
    for warning in warnings:
        click.echo(f"kcl-daemon: warning: {mask_url_password(warning)}", err=True)


@contextlib.contextmanager
def exit_on_errors(
    doing: str | None = None,
    *,
    failures: tuple[type[Exception], ...] = (),
    older: frozenset[threading.Thread] = frozenset(),
) -> Iterator[None]:
    """The one mapping from the project's errors to exit statuses, for every command.

    A :class:`ConfigError` lists every problem (and warning) and exits ``CONFIG``; a bad input file
    (:class:`RecordsFileError`) exits ``CONFIG`` naming its line; a command's :class:`CommandFailed` exits
    with its own status and message; any other :class:`KclError` (and the command's own ``failures``)
    exits ``FAILED`` with ``doing`` in front of the message; a second signal
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
    except CommandFailed as exc:
        _fail(exc.message, exc.status)
    except KclError as exc:
        _fail(f"{doing}: {exc}" if doing else str(exc), ExitStatus.FAILED)
    except Exception as exc:
        if not isinstance(exc, failures):
            raise
        _fail(f"{doing}: {exc}" if doing else str(exc), ExitStatus.FAILED)


class _Commands(click.Group):
    """The command group: every command (and the group's own default, `run`) runs inside
    :func:`exit_on_errors`; ``older``: the threads that are there before any command starts its own."""

    def invoke(self, ctx: click.Context) -> Any:
        with exit_on_errors(older=frozenset(threading.enumerate())):
            return super().invoke(ctx)


@click.group(
    cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True
)
@properties_option(f"{PROPERTIES_HELP} Without a command: run the daemon (like `run`).", required=False)
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


@main.command()
@properties_option(PROPERTIES_HELP)
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
    help="With --workers: SIGKILL one worker after this many seconds, once each holds leases (0: never).",
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
    settings = load_for(properties, REQUIRED_FOR_RUN)
    if workers is not None:
        if not local:
            refuse("--workers goes with --local (a fleet on the embedded backend)")
        from kcl_daemon.local.fleet import run_local_fleet

        with exit_on_errors():
            code = run_local_fleet(
                settings.leases(),
                settings.shards(),
                settings.lease_table_name,
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


@main.command("deregister-consumer")
@properties_option(
    "The daemon's .properties (or .yaml) file: fanoutConfig.consumerArn, or streamName/streamArn with "
    "fanoutConfig.consumerName or applicationName; endpoints."
)
def deregister_consumer_command(properties: Path) -> None:
    """Deregister the enhanced fan-out stream consumer the configuration names (the daemon never does
    it by itself: other workers of the application share the consumer). Exit 0 also when none exists."""
    settings = load_for(properties, ())
    from kcl_daemon.retrieval.efo_consumer import deregister_consumer  # boto3 only for the AWS commands

    with doing("cannot deregister the stream consumer"):
        what, existed = deregister_consumer(settings)
    click.echo(f"deregistered stream consumer {what}" if existed else f"no stream consumer {what}")


_REQUIRED_FOR: dict[str, tuple[Requirement, ...]] = {
    "run": REQUIRED_FOR_RUN,
    "leases": REQUIRED_FOR_LEASES,
    "replay": REQUIRED_FOR_REPLAY,
}


@main.command("check-config")
@properties_option("The daemon's .properties (or .yaml) file.")
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
            payload = report.invalid_json(str(properties), command, exc.problems, exc.warnings)
            click.echo(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode())
        else:
            _print_problems(exc.problems, exc.warnings)
        sys.exit(ExitStatus.CONFIG)
    if command != "leases":
        settings = dataclasses.replace(settings, warnings=(*settings.warnings, *path_warnings(settings)))
    rows = report.rows(settings, boto3_defaults())
    layout = None
    if table_state:
        from kcl_daemon.inspection.command import table_layout

        with doing(f"cannot read the tables of {settings.lease_table_name}", failures=(ValueError,)):
            layout = table_layout(settings)
    if as_json:
        payload = report.valid_json(str(properties), command, settings, rows, layout)
        click.echo(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo("\n".join(report.valid_lines(str(properties), command, settings, rows, layout)))


for _command in (leases, migrate, doctor, checkpoint, replay, dead_letters, simulate, spark_sync):
    main.add_command(_command)
