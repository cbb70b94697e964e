"""Checks on parsed values that ``run`` would otherwise fail on later (pure, except the executable
check, which looks at the file system as the daemon will when it starts a child).

Each check returns problems (errors) and warnings, each naming the key and where it was set:

* ``regionName`` must look like an AWS region (``us-east-1``, ``us-gov-west-1``, ``cn-north-1``);
* the lease table name (``tableName``, else ``applicationName``) must be a valid DynamoDB table name
  and ``streamName`` a valid Kinesis stream name;
* the processor in ``executableName``: a path must exist and be executable (an error); a bare name not
  found on ``PATH`` now is a warning from :func:`executable_warnings`, which the commands that start
  children call (it is looked up on PATH again when each child starts);
* ``initialPositionInStreamExtended`` must not be in the future (Kinesis rejects it on every read);
* ``poisonRecordPolicy`` DEAD_LETTER needs a ``deadLetterDestination`` that parses (sqs, kinesis, s3,
  file);
* the leader lock's duration must be at least twice its heartbeat (the lock client's rule);
* ``leaseRenewal = PER_WORKER`` needs a 2.x-compatible ``clientVersionConfig`` (the 2.x taker reads
  heartbeats; the 3.x leader does not yet);
* ``tableMigrationCompleteBakeTimeSeconds`` outside Java's 3600-604800 is a warning, and so are
  layout keys that contradict each other (:func:`kcl_daemon.core.leader.layout.configuration_warnings`).

Endpoint URLs (port range, scheme, host) are checked where they are parsed (``settings.parse_value``).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Final

from kcl_daemon.core.leader.layout import configuration_warnings
from kcl_daemon.core.leader.table_migration import TableLayoutConfig, effective_complete_bake_s
from kcl_daemon.core.lifecycle.dead_letter_address import policy_problems
from kcl_daemon.core.shards.multi_stream import parse_stream_list

REGION_PATTERN: Final = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]+")
TABLE_NAME_PATTERN: Final = re.compile(r"[a-zA-Z0-9_.-]{3,255}")
STREAM_NAME_PATTERN: Final = re.compile(r"[a-zA-Z0-9_.-]{1,128}")


def check_values(
    values: Mapping[str, object],
    sources: Mapping[str, str],
    *,
    now: datetime,
    path_env: str | None = None,
    cwd: Path | None = None,
) -> tuple[list[str], list[str]]:
    """(problems, warnings) for the parsed ``values`` (Settings field -> value)."""
    problems: list[str] = []
    warnings: list[str] = []

    def at(key: str) -> str:
        return sources.get(key, "default")

    region = values.get("region_name")
    if isinstance(region, str) and not REGION_PATTERN.fullmatch(region):
        problems.append(
            f"{at('regionName')}: regionName {region!r} is not an AWS region name (like us-east-1)"
        )
    table_key = "tableName" if values.get("table_name") is not None else "applicationName"
    table = values.get("table_name") or values.get("application_name")
    if isinstance(table, str) and not TABLE_NAME_PATTERN.fullmatch(table):
        problems.append(
            f"{at(table_key)}: {table_key} {table!r} is not a valid DynamoDB table name for the lease table "
            "(3-255 characters: letters, digits, '_', '-', '.')"
            + ("; set tableName to a valid one" if table_key == "applicationName" else "")
        )
    stream = values.get("stream_name")
    if isinstance(stream, str) and not STREAM_NAME_PATTERN.fullmatch(stream):
        problems.append(
            f"{at('streamName')}: streamName {stream!r} is not a valid Kinesis stream name "
            "(1-128 characters: letters, digits, '_', '-', '.')"
        )
    streams = values.get("stream_names")
    if isinstance(streams, str):
        problems.extend(_stream_list_problems(streams, values, at("streamNames")))
    argv = values.get("executable")
    if isinstance(argv, tuple) and argv:
        problem, _warning = check_executable(str(argv[0]), path_env=path_env, cwd=cwd)
        if problem:
            problems.append(f"{at('executableName')}: executableName {problem}")
    timestamp = values.get("initial_position_timestamp")
    if isinstance(timestamp, datetime) and timestamp > now:
        problems.append(
            f"{at('initialPositionInStreamExtended')}: initialPositionInStreamExtended "
            f"{int(timestamp.timestamp())} ({timestamp.isoformat()}) is in the future; Kinesis refuses it"
        )
    problems.extend(_lock_problems(values, at))
    policy, destination = values.get("poison_record_policy"), values.get("dead_letter_destination")
    if isinstance(policy, str) and (destination is None or isinstance(destination, str)):
        where = at("deadLetterDestination" if destination is not None else "poisonRecordPolicy")
        problems.extend(f"{where}: {problem}" for problem in policy_problems(policy, destination))
    warnings.extend(_layout_warnings(values, at))
    return problems, warnings


def _lock_problems(values: Mapping[str, object], at: Callable[[str], str]) -> list[str]:
    failover = values.get("failover_s", 10.0)
    duration = values.get("leader_lock_duration_s")
    heartbeat = values.get("leader_lock_heartbeat_s")
    if heartbeat is None:
        return []
    assert isinstance(heartbeat, float | int)
    effective = duration if duration is not None else failover
    assert isinstance(effective, float | int)
    if effective < 2 * heartbeat:
        name = (
            "dynamoDbLockBasedLeaderLeaseDurationInMillis" if duration is not None else "failoverTimeMillis"
        )
        return [
            f"{at('dynamoDbLockBasedLeaderHeartbeatPeriodInMillis')}: "
            f"dynamoDbLockBasedLeaderHeartbeatPeriodInMillis {heartbeat * 1000:g} is more than half the "
            f"lock duration ({name} {effective * 1000:g}); the lock "
            "would expire between heartbeats"
        ]
    return []


def _layout_warnings(values: Mapping[str, object], at: Callable[[str], str]) -> list[str]:
    out = []
    bake = values.get("table_migration_complete_bake_s")
    if isinstance(bake, float | int):
        _effective, note = effective_complete_bake_s(float(bake))
        if note:
            out.append(
                f"{at('tableMigrationCompleteBakeTimeSeconds')}: tableMigrationCompleteBakeTimeSeconds {note}"
            )
    configured = values.get("lease_table_layout")
    layout = None if configured is None else TableLayoutConfig(str(configured))
    migrate_all = bool(values.get("migrate_all_entities_to_lease_table", False))
    version = str(values.get("client_version_config", "CLIENT_VERSION_CONFIG_3X"))
    if "lease_table_layout" in values or "migrate_all_entities_to_lease_table" in values:
        out += [
            f"{at('leaseTableLayout')}: {w}" for w in configuration_warnings(layout, migrate_all, version)
        ]
    return out


def executable_warnings(
    executable: tuple[str, ...] | None, where: str, *, path_env: str | None = None
) -> list[str]:
    """A warning when the processor is a bare name that is not on PATH now."""
    if not executable:
        return []
    _problem, warning = check_executable(executable[0], path_env=path_env, cwd=None)
    return [f"{where}: executableName {warning}"] if warning else []


def check_executable(
    program: str, *, path_env: str | None, cwd: Path | None
) -> tuple[str | None, str | None]:
    """(problem, warning) for the program a child is started with."""
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else (cwd or Path.cwd()) / program
        if not path.exists():
            return f"{program!r} does not exist (looked for {path})", None
        if path.is_dir():
            return f"{program!r} is a directory, not a program", None
        if not os.access(path, os.X_OK):
            return f"{program!r} is not executable (chmod +x {path})", None
        return None, None
    if shutil.which(program, path=path_env if path_env is not None else os.environ.get("PATH")) is None:
        return None, (
            f"{program!r} is not found on PATH now; it is looked up on PATH again when each child starts"
        )
    return None, None


def _stream_list_problems(text: str, values: Mapping[str, object], where: str) -> list[str]:
    """streamNames must parse, and it replaces streamName/streamArn rather than adding to them."""
    try:
        parse_stream_list(text)
    except ValueError as exc:
        return [f"{where}: streamNames {exc}"]
    if values.get("stream_name") is not None or values.get("stream_arn") is not None:
        return [f"{where}: streamNames lists every stream; remove streamName/streamArn (or streamNames)"]
    return []
