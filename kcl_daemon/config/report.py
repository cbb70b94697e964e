"""The effective configuration as rows (key, value in the key's own unit, source) for ``check-config``.

Pure: the caller passes what boto3 would use for unset region/endpoint keys (see
:func:`kcl_daemon.aws.clients.boto3_defaults`). An ``externalId`` in a credentials value and a password
in an endpoint URL are masked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from kcl_daemon.config.keys import IGNORED_BY_NAME, KEYS, Key, Kind
from kcl_daemon.config.providers import describe, parse_providers
from kcl_daemon.config.secrets import mask_url_password
from kcl_daemon.config.settings import Settings, graceful_stop_budget_s
from kcl_daemon.core.leader.layout import layout_summary
from kcl_daemon.core.leader.table_migration import TableLayoutConfig
from kcl_daemon.core.shards.multi_stream import parse_stream_list

_EXTERNAL_ID = re.compile(r"(externalId\s*=)[^|,]*")

JsonValue = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class Row:
    key: str
    field: str | None  # None for an accepted-but-ignored Java key
    value: JsonValue  # in the key's unit: milliseconds stay milliseconds
    source: str  # "app.properties:12", "default", "environment (AWS_DEFAULT_REGION)", ...
    note: str = ""  # what an unset value means, or why an ignored key has no effect

    @property
    def text(self) -> str:
        if self.value is None:
            return "unset"
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        return str(self.value)


def mask(text: str) -> str:
    return _EXTERNAL_ID.sub(r"\1***", text)


def user_value(key: Key, value: object) -> JsonValue:
    """``value`` (as stored in Settings) in the unit the key is written in."""
    if value is None:
        return None
    match key.kind:
        case Kind.MILLIS:
            assert isinstance(value, float | int)
            millis = value * 1000
            return round(millis) if abs(millis - round(millis)) < 1e-6 else millis
        case Kind.ARGV | Kind.NAMES:
            assert isinstance(value, tuple)
            return (" " if key.kind is Kind.ARGV else ",").join(value)
        case Kind.EPOCH_SECONDS:
            assert isinstance(value, datetime)
            return int(value.timestamp())
        case Kind.CREDENTIALS:
            return mask(str(value))
        case Kind.URL:
            return mask_url_password(str(value))
        case Kind.POSITION:
            return str(value)
    assert isinstance(value, str | int | float | bool)
    return value


def rows(settings: Settings, aws_defaults: Mapping[str, tuple[str, str]] | None = None) -> list[Row]:
    """One row per key of the table, then one per ignored Java key that is set."""
    result: list[Row] = []
    for key in KEYS:
        value = user_value(key, getattr(settings, key.field))
        source = settings.sources.get(key.name, "default")
        note = ""
        if source == "default" and aws_defaults and key.name in aws_defaults:
            value, source = aws_defaults[key.name]
        elif value is None and key.unset != "unset":
            note = key.unset
        result.append(Row(key.name, key.field, value, source, note))
    for name, (raw, where) in settings.ignored.items():
        result.append(Row(name, None, raw.strip(), where, f"ignored: {IGNORED_BY_NAME[name].reason}"))
    return result


def derived(settings: Settings) -> dict[str, JsonValue]:
    """Values the daemon computes from several keys."""
    stream_source = "streamArn" if settings.stream_arn else "streamName"
    mode = settings.effective_retrieval_mode
    if settings.retrieval_mode == "DEFAULT":
        mode += " (retrievalMode DEFAULT: " + (
            "a polling key is set)" if mode == "POLLING" else "no polling key is set, as Java decides)"
        )
    position: str = settings.initial_position
    if settings.initial_position_timestamp is not None:
        position += f" {settings.initial_position_timestamp.isoformat()}"
    main = _credentials(settings.aws_credentials_provider, "boto3 default chain")
    if settings.stream_names:
        stream_text: str | None = "several (streamNames): " + ", ".join(
            f"{spec.name} at {spec.initial_position or 'the initial position'}"
            for spec in parse_stream_list(settings.stream_names)
        )
    elif settings.effective_stream_name:
        stream_text = f"{settings.effective_stream_name} (from {stream_source})"
    else:
        stream_text = None
    return {
        "streamName": stream_text,
        "leaseTableName": settings.lease_table_name,
        "workerId": settings.worker_id or "a random UUID at start",
        "retrievalMode": mode,
        "initialPosition": position,
        "leaseAssignmentIntervalMillis": round(settings.effective_lease_assignment_interval_s * 1000),
        "leaseExpiryCheckIntervalMillis": round(settings.effective_lease_expiry_check_s * 1000),
        "tableLayout": layout_summary(
            None if settings.lease_table_layout is None else TableLayoutConfig(settings.lease_table_layout),
            settings.migrate_all_entities_to_lease_table,
            settings.client_version_config,
        ),
        "leaderLock": (
            f"{round(settings.effective_leader_lock_duration_s * 1000)} ms, heartbeat every "
            f"{round(settings.effective_leader_lock_heartbeat_s * 1000)} ms"
        ),
        "gracefulStopSeconds": graceful_stop_budget_s(settings),
        "credentials.kinesis": main,
        "credentials.dynamodb": _credentials(settings.aws_credentials_provider_dynamodb, main),
        "credentials.cloudwatch": _credentials(settings.aws_credentials_provider_cloudwatch, main),
    }


def _credentials(raw: str | None, fallback: str) -> str:
    if raw is None:
        return fallback
    try:
        return describe(parse_providers(raw).chain)
    except ValueError:  # pragma: no cover - load_settings has rejected it already
        return "invalid"
