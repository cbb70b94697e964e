"""Several streams per application, as pure functions: the ``streamNames`` list and former streams.

``streamNames`` is a comma-separated list of entries ``NAME`` or ``NAME=POSITION``, where POSITION is
``LATEST``, ``TRIM_HORIZON`` or ``AT_TIMESTAMP@<epoch seconds>`` (Java's per-stream
``StreamConfig.initialPositionInStreamExtended``); an entry without one uses
``initialPositionInStream``. With ``streamNames`` set the application is multi-stream, as a Java
``MultiStreamTracker`` application: every lease key is ``accountId:streamName:creationEpoch:shardId``
(:mod:`kcl_daemon.core.stream_identity`), even with one stream listed.

Former streams (Java ``FormerStreamsLeasesDeletionStrategy``, auto-detection with a deferred
deletion): a stream identity that has leases in the table but is no longer current (its stream was
deleted, re-created under the same name with a new creation epoch, or removed from ``streamNames``)
has its leases deleted once it has been seen former for the wait period.
:func:`former_streams_due` decides which, over plain data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from kcl_daemon.core.sequence import Sentinel
from kcl_daemon.core.stream_identity import _STREAM_NAME, StreamIdentity, parse_stream_identity

_POSITIONS: Final = {"LATEST": Sentinel.LATEST, "TRIM_HORIZON": Sentinel.TRIM_HORIZON}
_AT_TIMESTAMP: Final = "AT_TIMESTAMP@"


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """One configured stream: its name and, when given, its own initial position."""

    name: str
    initial_position: Sentinel | None = None  # None: initialPositionInStream
    initial_timestamp: datetime | None = None  # with AT_TIMESTAMP

    def position_or(
        self, default: Sentinel, default_timestamp: datetime | None
    ) -> tuple[Sentinel, datetime | None]:
        """This stream's initial position, else the application's."""
        if self.initial_position is None:
            return default, default_timestamp
        return self.initial_position, self.initial_timestamp


def _parse_position(entry: str, text: str) -> tuple[Sentinel, datetime | None]:
    upper = text.strip().upper()
    if upper in _POSITIONS:
        return _POSITIONS[upper], None
    if upper.startswith(_AT_TIMESTAMP):
        seconds = text.strip()[len(_AT_TIMESTAMP) :]
        if not seconds.isdigit():
            raise ValueError(f"entry {entry!r}: AT_TIMESTAMP@ needs whole epoch seconds, got {seconds!r}")
        return Sentinel.AT_TIMESTAMP, datetime.fromtimestamp(int(seconds), tz=UTC)
    raise ValueError(
        f"entry {entry!r}: initial position {text.strip()!r} is not LATEST, TRIM_HORIZON or "
        "AT_TIMESTAMP@<epoch seconds>"
    )


def parse_stream_list(text: str) -> tuple[StreamSpec, ...]:
    """``a, b=TRIM_HORIZON, c=AT_TIMESTAMP@1700000000`` -> specs; ValueError naming the bad entry."""
    specs: list[StreamSpec] = []
    seen: set[str] = set()
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            raise ValueError(f"{text!r} has an empty entry (two commas, or one at an end)")
        name, has_position, position = entry.partition("=")
        name = name.strip()
        if not _STREAM_NAME.fullmatch(name):
            raise ValueError(f"entry {entry!r}: stream name {name!r} is not 1-128 of [a-zA-Z0-9_.-]")
        if name in seen:
            raise ValueError(f"stream {name!r} is listed twice")
        seen.add(name)
        if has_position:
            sentinel, timestamp = _parse_position(entry, position)
            specs.append(StreamSpec(name, sentinel, timestamp))
        else:
            specs.append(StreamSpec(name))
    return tuple(specs)


@dataclass(frozen=True, slots=True)
class FormerStreams:
    """The outcome of one check: identities to delete now, and when each remaining one was first seen."""

    delete: tuple[str, ...]
    first_seen: Mapping[str, float]


def former_streams_due(
    lease_streams: Iterable[str | None],
    current: Iterable[str],
    first_seen: Mapping[str, float],
    now: float,
    wait_s: float,
) -> FormerStreams:
    """Which former streams' leases to delete now.

    ``lease_streams``: the stream identity of every lease in the table (None for single-stream leases,
    which are never touched); ``current``: the identities of the configured streams that exist now;
    ``first_seen``: from the previous check. A former identity is deleted once ``now`` is at least
    ``wait_s`` after it was first seen former; one that became current again is forgotten.
    """
    live = frozenset(current)
    former = sorted({s for s in lease_streams if s is not None and s not in live})
    seen = {stream: first_seen.get(stream, now) for stream in former}
    due = tuple(stream for stream in former if now - seen[stream] >= wait_s)
    return FormerStreams(due, {s: t for s, t in seen.items() if s not in due})


def stream_fields(stream_identifier: str | None) -> dict[str, str]:
    """The ``initialize`` fields naming a multi-stream lease's stream; none for a single-stream lease."""
    if stream_identifier is None:
        return {}
    return {
        "stream_name": parse_stream_identity(stream_identifier).stream_name,
        "stream_identifier": stream_identifier,
    }


def recreated_stream(lease_stream: str, current: StreamIdentity | None) -> str | None:
    """Why a lease of ``lease_stream`` must not be read, or None when it may be.

    Reads go by stream name, so a lease of a stream since re-created under the same name (a new creation
    epoch) would read the new stream's shard of the same id. ``current`` is the stream's identity as last
    looked up (None: unknown or deleted; a deleted stream's leases are read on, reading ends their shards).
    """
    identity = parse_stream_identity(lease_stream)
    if current is None or current == identity:
        return None
    return (
        f"lease of {lease_stream} belongs to a former stream: {identity.stream_name} was re-created "
        f"({current.serialize()}); not read"
    )
