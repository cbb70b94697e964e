"""What every command's declaration shares: the ``--properties`` option, loading the settings a command
needs, naming what a failure was doing, refusing bad input, and indented JSON.

The commands declare themselves in their own packages (``doctor.cli``, ``inspection.cli``, ...) with
these pieces; errors become exit statuses in one place, ``kcl_daemon.cli.exit_on_errors``, which wraps
every command: a :class:`CommandFailed` raised here carries its message and status there.

May import: ``stopping``, ``config``, ``errors`` and click; nothing that talks to AWS.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import orjson

from kcl_daemon.config.settings import REQUIRED_FOR_REPLAY, Requirement, Settings, load_settings
from kcl_daemon.config.validate import executable_warnings
from kcl_daemon.errors import CommandFailed, ConfigError, ExitStatus, KclError, RecordsFileError
from kcl_daemon.stopping import StoppedAtOnce

F = TypeVar("F", bound=Callable[..., Any])

PROPERTIES_HELP = "The daemon's .properties (or .yaml) file; executableName names the processor."


def properties_option(help_text: str, *, required: bool = True) -> Callable[[F], F]:
    """``--properties FILE``, also spelled ``--properties-file`` as the Java daemon does."""
    return click.option(
        "--properties",
        "--properties-file",
        "properties",
        required=required,
        type=click.Path(path_type=Path, dir_okay=False),
        help=help_text,
    )


def path_warnings(settings: Settings) -> list[str]:
    """executableName's warnings (a relative path, not executable, ...), naming where it was set."""
    where = settings.sources.get("executableName", "executableName")
    return executable_warnings(settings.executable, where)


def load_for(path: Path, required: tuple[Requirement, ...] = REQUIRED_FOR_REPLAY) -> Settings:
    """Load for a command (``required``: what it needs) and print the warnings; a :class:`ConfigError`
    (every problem) propagates to ``exit_on_errors``, which lists them and exits 2."""
    settings = load_settings(path, required=required)
    for warning in (*settings.warnings, *path_warnings(settings)):
        click.echo(f"kcl-daemon: warning: {warning}", err=True)
    return settings


def refuse(message: str, status: ExitStatus = ExitStatus.CONFIG) -> NoReturn:
    """End the command with ``kcl-daemon: MESSAGE`` and ``status`` (bad input: ``CONFIG``)."""
    raise CommandFailed(message, status)


@contextlib.contextmanager
def doing(what: str | None = None, *, failures: tuple[type[Exception], ...] = ()) -> Iterator[None]:
    """A :class:`KclError` (or one of the command's own ``failures``) inside becomes a
    :class:`CommandFailed` (exit ``FAILED``) with ``what`` in front of its message. Bad configuration or
    input, a second signal and a command's own refusal pass through unchanged."""
    try:
        yield
    except (ConfigError, RecordsFileError, StoppedAtOnce, CommandFailed):
        raise
    except KclError as exc:
        raise CommandFailed(f"{what}: {exc}" if what else str(exc)) from exc
    except Exception as exc:
        if not isinstance(exc, failures):
            raise
        raise CommandFailed(f"{what}: {exc}" if what else str(exc)) from exc


def dumps_json(payload: object) -> str:
    """Indented JSON; integers beyond 64 bits (a corrupt ``leaseCounter``) are written exactly."""
    try:
        return orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode()
    except TypeError:  # orjson holds 64-bit integers only
        return json.dumps(payload, indent=2, ensure_ascii=False, default=str)
