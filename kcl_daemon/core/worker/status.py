"""What the status page shows (``/`` and ``/status.json`` on the metrics port), as plain data.

Pure: the worker's shell (:mod:`kcl_daemon.worker.status`) fills a :class:`StatusSnapshot` from what it
already keeps when someone asks, :mod:`kcl_daemon.metrics.status_page` turns it into HTML or JSON. The
small helpers here compute the derived figures (a records rate from two counts, the points of a
sparkline) so that they are tested without a worker.

A snapshot carries no record payload and no credential: shard ids, counts, sequence numbers, worker ids,
health reasons, and the last line a child wrote on stderr (already logged at INFO; cut to
:data:`STDERR_LINE_LIMIT` characters).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from kcl_daemon.core.worker.health import HealthReport

#: a child's last stderr line is cut to this many characters on the page
STDERR_LINE_LIMIT: Final = 240
#: expired and unowned leases are listed by key up to this many (the counts are always whole)
LISTED_LEASES: Final = 50


@dataclass(frozen=True, slots=True)
class ShardView:
    """One lease this worker holds, and the shard behind it."""

    lease_key: str
    shard_id: str
    #: the consumer's state (``processing``, ``waiting-on-parents``, ``parked``, ``restarting`` ...)
    state: str
    millis_behind_latest: int | None = None
    records_per_s: float | None = None
    records_delivered: int = 0
    #: the sequence number (or sentinel: TRIM_HORIZON, SHARD_END ...) last checkpointed or loaded
    checkpoint: str | None = None
    #: seconds since this worker last wrote a checkpoint for the shard (None: none written yet)
    checkpoint_age_s: float | None = None
    child_pid: int | None = None
    #: children started again after a failure, over the shard's tasks on this worker
    child_restarts: int = 0
    last_stderr: str | None = None
    #: what is going on that an operator should see: a hand-off, a park, a stall (None: nothing)
    note: str | None = None
    #: millisBehindLatest over the last minutes, oldest first (None: not known at that sample)
    lag_history: tuple[int | None, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkerView:
    worker_id: str
    zone: str | None
    #: ``2.x taker`` or ``3.x leader``, with the client version in 3.x-aware mode
    lease_mode: str
    #: True/False in leader mode (as of the last lock check); None where there is no leader (2.x)
    leader: bool | None
    #: the leader this worker last saw (None: none seen, or 2.x)
    leader_id: str | None
    phase: str
    uptime_s: float
    pid: int
    liveness: HealthReport
    readiness: HealthReport
    stream: str = ""
    table: str = ""
    #: restartGraceMillis in seconds (0: off)
    restart_grace_s: float = 0.0
    #: a graceful stop keeps the leases for this worker's return (a restart grace in progress)
    keeping_leases: bool = False


@dataclass(frozen=True, slots=True)
class FleetWorker:
    worker_id: str
    zone: str
    leases: int
    #: leases over the last minutes, oldest first (None: not in the scan at that sample)
    history: tuple[int | None, ...] = ()


@dataclass(frozen=True, slots=True)
class FleetView:
    """The lease table as this worker last read it (the taker's or the leader's scan; no extra read)."""

    #: seconds since that scan; None: this worker has not read the whole table (a 3.x follower)
    scanned_age_s: float | None
    total_leases: int = 0
    total_shards: int | None = None
    finished: int = 0
    workers: tuple[FleetWorker, ...] = ()
    zones: tuple[tuple[str, int], ...] = ()
    #: owned leases not renewed for the failover time, as this worker saw them
    expired: tuple[tuple[str, str], ...] = ()  # (lease key, owner), the first LISTED_LEASES
    unowned: tuple[str, ...] = ()  # unfinished leases without an owner, the first LISTED_LEASES
    expired_count: int = 0
    unowned_count: int = 0


@dataclass(frozen=True, slots=True)
class StatusSnapshot:
    worker: WorkerView
    shards: tuple[ShardView, ...]
    fleet: FleetView
    #: wall clock (epoch seconds) of the snapshot
    generated_at: float
    #: how often the page reloads itself, and how far apart the history samples are
    refresh_s: int = 5
    sample_every_s: float = 5.0


def records_rate(
    count_now: int, now: float, samples: Sequence[tuple[float, int]], min_span_s: float = 1.0
) -> float | None:
    """Records per second from a running count: against the newest sample at least ``min_span_s`` old.

    ``samples`` are (time, count), oldest first. A count lower than the sample's (the shard's task started
    again, its count with it) gives None, as does no sample old enough.
    """
    for at, count in reversed(samples):
        span = now - at
        if span >= min_span_s:
            if count_now < count:
                return None
            return (count_now - count) / span
    return None


def sparkline_points(
    values: Sequence[float | None], width: int, height: int, *, floor_max: float = 1.0
) -> list[list[tuple[int, int]]]:
    """The polyline segments of a sparkline, in whole pixels: x spread over ``width``, y from ``height``
    (0 or less) up to 0 (the maximum, at least ``floor_max`` so a flat zero stays at the bottom). A None
    value breaks the line."""
    known = [v for v in values if v is not None]
    if not known:
        return []
    scale = height / max(max(known), floor_max)
    step = width / max(len(values) - 1, 1)
    segments: list[list[tuple[int, int]]] = []
    current: list[tuple[int, int]] = []
    for index, value in enumerate(values):
        if value is None:
            if current:
                segments.append(current)
                current = []
            continue
        current.append((int(index * step + 0.5), int(height - (value if value > 0 else 0) * scale + 0.5)))
    if current:
        segments.append(current)
    return segments


def cut_line(line: str | None, limit: int = STDERR_LINE_LIMIT) -> str | None:
    """One stderr line as the page shows it: control characters out, at most ``limit`` characters."""
    if line is None:
        return None
    clean = "".join(ch if ch.isprintable() else " " for ch in line).strip()
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def health_json(report: HealthReport) -> dict[str, object]:
    return report.as_json()


def snapshot_json(snapshot: StatusSnapshot) -> dict[str, object]:
    """The snapshot as ``/status.json`` serves it (keys are the page's contract; see docs/monitoring.md)."""
    w = snapshot.worker
    f = snapshot.fleet
    return {
        "generatedAt": round(snapshot.generated_at, 3),
        "refreshSeconds": snapshot.refresh_s,
        "sampleEverySeconds": snapshot.sample_every_s,
        "worker": {
            "workerId": w.worker_id,
            "zone": w.zone,
            "stream": w.stream,
            "leaseTable": w.table,
            "leaseMode": w.lease_mode,
            "leader": w.leader,
            "leaderId": w.leader_id,
            "phase": w.phase,
            "uptimeSeconds": round(w.uptime_s, 1),
            "pid": w.pid,
            "restartGraceSeconds": w.restart_grace_s,
            "keepingLeasesForRestart": w.keeping_leases,
            "health": health_json(w.liveness),
            "ready": health_json(w.readiness),
        },
        "shards": [
            {
                "leaseKey": s.lease_key,
                "shardId": s.shard_id,
                "state": s.state,
                "millisBehindLatest": s.millis_behind_latest,
                "recordsPerSecond": None if s.records_per_s is None else round(s.records_per_s, 2),
                "recordsDelivered": s.records_delivered,
                "checkpoint": s.checkpoint,
                "checkpointAgeSeconds": None if s.checkpoint_age_s is None else round(s.checkpoint_age_s, 1),
                "childPid": s.child_pid,
                "childRestarts": s.child_restarts,
                "lastStderrLine": s.last_stderr,
                "note": s.note,
                "lagHistory": list(s.lag_history),
            }
            for s in snapshot.shards
        ],
        "fleet": {
            "scannedAgeSeconds": None if f.scanned_age_s is None else round(f.scanned_age_s, 1),
            "totalLeases": f.total_leases,
            "totalShards": f.total_shards,
            "finishedLeases": f.finished,
            "workers": [
                {"workerId": x.worker_id, "zone": x.zone, "leases": x.leases, "history": list(x.history)}
                for x in f.workers
            ],
            "zones": [{"zone": zone, "leases": count} for zone, count in f.zones],
            "expiredCount": f.expired_count,
            "unownedCount": f.unowned_count,
            "expiredLeases": [{"leaseKey": key, "owner": owner} for key, owner in f.expired],
            "unownedLeases": list(f.unowned),
        },
    }
