"""Load a properties (or YAML) file into typed :class:`Settings`, reporting every problem at once.

Differences from Java, on purpose: an explicit ``false`` or ``0`` is honoured (Java ignores both for
primitive keys), and a value that does not parse is an error naming the key and line (Java silently
uses 0). Unknown keys are warnings, never errors, so files written for the Java daemon keep working.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kcl_daemon.config.keys import KEYS, KEYS_BY_NAME, Key, Kind, is_known_key
from kcl_daemon.config.properties import PropertiesSyntaxError, parse_properties
from kcl_daemon.errors import ConfigError

_TRUE = {"true", "yes", "y", "on", "1"}
_FALSE = {"false", "no", "n", "off", "0"}


@dataclass(frozen=True, slots=True)
class Settings:
    executable: tuple[str, ...] | None = None
    application_name: str | None = None
    stream_name: str | None = None
    processing_language: str | None = None
    action_timeout_s: float | None = None
    call_process_records_even_for_empty_record_list: bool = False
    max_records: int = 10000
    initialize_timeout_s: float | None = None
    process_records_timeout_s: float | None = None
    shutdown_timeout_s: float | None = None
    child_write_timeout_s: float = 30.0
    child_stop_timeout_s: float = 5.0
    child_max_line_bytes: int = 1024 * 1024
    child_restart_backoff_s: float = 1.0
    child_restart_max_backoff_s: float = 60.0
    child_max_consecutive_failures: int = 5
    #: key -> where its value came from ("app.properties:12", "default")
    sources: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def _parse_value(key: Key, raw: str) -> object:
    text = raw.strip()
    match key.kind:
        case Kind.STRING:
            if not text:
                raise ValueError("is empty")
            return text
        case Kind.ARGV:
            argv = tuple(part for part in text.split(" ") if part)
            if not argv:
                raise ValueError("is empty")
            return argv
        case Kind.BOOL:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError(f"{text!r} is not a boolean (true/false)")
        case Kind.INT | Kind.BYTES | Kind.MILLIS:
            try:
                number = int(text)
            except ValueError:
                unit = "" if key.kind is Kind.INT else f" of {key.kind.value}"
                raise ValueError(f"{text!r} is not a whole number{unit}") from None
            _check_minimum(key, number)
            return number / 1000 if key.kind is Kind.MILLIS else number
        case Kind.SECONDS:
            try:
                seconds = float(text)
            except ValueError:
                raise ValueError(f"{text!r} is not a number of seconds") from None
            _check_minimum(key, seconds)
            return seconds
    raise AssertionError(key.kind)  # pragma: no cover


def _check_minimum(key: Key, value: float) -> None:
    if key.minimum is not None and value < key.minimum:
        raise ValueError(f"{value:g} is below the minimum {key.minimum:g}")


def _read_raw(path: Path) -> dict[str, tuple[str, str]]:
    """key -> (raw value, where) from a .properties or YAML file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the configuration file: {exc.strerror or exc}"]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"]) from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError([f"{path}: invalid YAML: {exc}"]) from None
        if loaded is None:
            return {}
        if not isinstance(loaded, dict):
            raise ConfigError([f"{path}: the YAML document must be a mapping of key: value"])
        raw: dict[str, tuple[str, str]] = {}
        for k, v in loaded.items():
            value = ("true" if v else "false") if isinstance(v, bool) else ("" if v is None else str(v))
            raw[str(k)] = (value, str(path))
        return raw
    try:
        entries = parse_properties(text, source=str(path))
    except PropertiesSyntaxError as exc:
        raise ConfigError([str(exc)]) from None
    return {k: (e.value, f"{path}:{e.line}") for k, e in entries.items()}


def load_settings(path: Path, *, required: tuple[str, ...] = ("executableName",)) -> Settings:
    """Read ``path`` and return its settings; raise :class:`ConfigError` listing every problem."""
    raw = _read_raw(path)
    problems: list[str] = []
    warnings: list[str] = []
    values: dict[str, object] = {}
    sources: dict[str, str] = {key.name: "default" for key in KEYS}
    for name, (value, where) in raw.items():
        key = KEYS_BY_NAME.get(name)
        if key is None:
            if not is_known_key(name):
                warnings.append(f"{where}: unknown key {name!r} is ignored")
            continue
        try:
            values[key.field] = _parse_value(key, value)
            sources[name] = where
        except ValueError as exc:
            problems.append(f"{where}: {name} {exc}")
    for name in required:
        if name not in raw:
            problems.append(f"{path}: required key {name} is missing")
    if problems:
        raise ConfigError(problems)
    settings = Settings(**values)  # type: ignore[arg-type]
    return dataclasses.replace(settings, sources=sources, warnings=tuple(warnings))
