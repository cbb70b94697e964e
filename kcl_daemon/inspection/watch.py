"""`kcl-daemon leases --watch`: redraw the lease table and the per-worker/per-zone spread every few seconds.

Each refresh scans the table (or scrapes a daemon's metrics endpoint with ``--metrics-url``), keeps the
leases' counters between scans to tell which owned leases nobody renews (expired after
``failoverTimeMillis``, as a worker sees it), and redraws the screen. With ``--html FILE`` every refresh
also rewrites a page that plots leases per worker over the whole watch (:mod:`kcl_daemon.inspection.plot`).
Rendering is pure (:func:`render_screen`); the loop only scans, draws and sleeps.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kcl_daemon.clock import Clock, SystemClock
from kcl_daemon.config.settings import Settings
from kcl_daemon.core.inspection.distribution import cluster_of, summarize
from kcl_daemon.core.inspection.figures import FleetFigures, fleet_figures
from kcl_daemon.core.leases.expiry import LeaseObservations
from kcl_daemon.core.leases.heartbeat import HeartbeatObservations, vouched, workers_of
from kcl_daemon.core.leases.lease_codec import ScanResultLike
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.errors import KclError
from kcl_daemon.inspection.plot import Frame, render_html
from kcl_daemon.inspection.report import report_text
from kcl_daemon.inspection.table import LeaseTableReport

CLEAR = "\x1b[H\x1b[2J"
_BAR_WIDTH = 40


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one refresh saw: the table report (None when watching a metrics endpoint) and the figures."""

    title: str
    figures: FleetFigures
    report: LeaseTableReport | None = None


def _bars(title: str, counts: dict[str, int] | object) -> list[str]:
    assert isinstance(counts, dict)
    if not counts:
        return [f"{title}: (none)"]
    most = max(counts.values()) or 1
    width = max(len(name) for name in counts)
    lines = [f"{title}:"]
    for name, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        bar = "#" * max(round(count / most * _BAR_WIDTH), 1 if count else 0)
        lines.append(f"  {name:<{width}}  {bar} {count}")
    return lines


def render_screen(snapshot: Snapshot, *, at: str, every_s: float) -> str:
    figures = snapshot.figures
    shards = "?" if figures.total_shards is None else str(figures.total_shards)
    lines = [
        f"{snapshot.title} at {at}, every {every_s:g}s (Ctrl-C stops)",
        f"leases {figures.total_leases}, shards {shards}, workers {figures.workers}, unclaimed "
        f"{figures.unclaimed}, expired {figures.expired}, finished {figures.finished}, skew {figures.skew}",
        "",
        *_bars("leases per worker", dict(figures.per_worker)),
        *_bars("leases per zone", dict(figures.per_zone)),
    ]
    if snapshot.report is not None:
        lines += ["", report_text(snapshot.report)]
    return "\n".join(lines) + "\n"


class TableSampler:
    """Scans the lease table each time it is called; remembers counters to see expiry."""

    def __init__(
        self,
        table_name: str,
        scan: Callable[[], ScanResultLike],
        list_shards: Callable[[], Sequence[Shard]] | None,
        clock: Clock,
        *,
        failover_s: float,
        cluster_separator: str = "-",
    ) -> None:
        self._table_name = table_name
        self._scan = scan
        self._list_shards = list_shards
        self._clock = clock
        self._failover_s = failover_s
        self._zone = lambda worker: cluster_of(worker, cluster_separator)
        self._observations = LeaseObservations()
        self._beats = HeartbeatObservations()
        self._first_at: float | None = None

    async def __call__(self) -> Snapshot:
        result = await asyncio.to_thread(self._scan)
        now = self._clock.monotonic()
        if self._first_at is None:
            self._first_at = now
        self._observations = self._observations.observe(result.leases, now)
        self._beats = self._beats.observe(workers_of(result), now)
        # leases kept by their owner's heartbeat (leaseRenewal = PER_WORKER): expired when both stood still
        observations = vouched(result.leases, self._observations, self._beats)
        # Expiry needs a failover time of observation: before that, nothing counts as expired.
        seen_long_enough = now - self._first_at >= self._failover_s
        expired = frozenset(
            lease.lease_key
            for lease in result.leases
            if seen_long_enough
            and lease.lease_owner is not None
            and observations.is_expired(lease.lease_key, now, self._failover_s)
        )
        shard_ids: list[str] | None = None
        error: str | None = None
        if self._list_shards is not None:
            try:
                shard_ids = [s.shard_id for s in await asyncio.to_thread(self._list_shards)]
            except KclError as exc:
                error = str(exc)
        distribution = summarize(result.leases, expired_keys=expired, shard_ids=shard_ids, cluster=self._zone)
        report = LeaseTableReport(self._table_name, distribution, tuple(result.skipped), error)
        figures = fleet_figures(
            result.leases,
            expired_keys=expired,
            total_shards=None if shard_ids is None else len(shard_ids),
            zone_of=self._zone,
        )
        return Snapshot(f"lease table {self._table_name}", figures, report)


class MetricsSampler:
    """Reads the fleet figures a running daemon exports (``kcl_fleet_*`` on its Prometheus endpoint)."""

    def __init__(self, url: str) -> None:
        self._url = url

    def _read(self) -> FleetFigures:
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(self._url, timeout=5) as response:  # noqa: S310 - a URL the user gave
            text = response.read().decode("utf-8", errors="replace")
        single: dict[str, float] = {}
        per_worker: dict[str, int] = {}
        per_zone: dict[str, int] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "kcl_fleet_worker_leases":
                    per_worker[sample.labels["worker"]] = int(sample.value)
                elif sample.name == "kcl_fleet_zone_leases":
                    per_zone[sample.labels["zone"]] = int(sample.value)
                elif sample.name.startswith("kcl_fleet_"):
                    single[sample.name] = sample.value
        if "kcl_fleet_total_leases" not in single:
            raise KclError(f"{self._url} has no kcl_fleet_* metrics: is it a kcl-daemon metrics endpoint?")
        return FleetFigures(
            total_leases=int(single.get("kcl_fleet_total_leases", 0)),
            unclaimed=int(single.get("kcl_fleet_unclaimed_leases", 0)),
            expired=int(single.get("kcl_fleet_expired_leases", 0)),
            finished=0,
            total_shards=int(single["kcl_fleet_total_shards"])
            if "kcl_fleet_total_shards" in single
            else None,
            per_worker=per_worker,
            per_zone=per_zone,
        )

    async def __call__(self) -> Snapshot:
        try:
            figures = await asyncio.to_thread(self._read)
        except OSError as exc:
            raise KclError(f"cannot read {self._url}: {exc}") from None
        return Snapshot(f"metrics {self._url}", figures)


async def watch(
    sample: Callable[[], Awaitable[Snapshot]],
    clock: Clock,
    out: TextIO,
    *,
    every_s: float,
    html: Path | None = None,
    refreshes: int | None = None,
    clear: bool = True,
) -> int:
    """Redraw until cancelled (or ``refreshes`` times); returns the number of refreshes drawn."""
    frames: list[Frame] = []
    drawn = 0
    while refreshes is None or drawn < refreshes:
        if drawn:
            await clock.sleep(every_s)
        snapshot = await sample()
        at = time.strftime("%H:%M:%S")
        out.write((CLEAR if clear else "") + render_screen(snapshot, at=at, every_s=every_s))
        out.flush()
        frames.append(Frame(time.time(), dict(snapshot.figures.per_worker), snapshot.figures.unclaimed))
        if html is not None:
            tmp = html.with_suffix(html.suffix + ".tmp")
            tmp.write_text(render_html(frames, title=snapshot.title), encoding="utf-8")
            tmp.replace(html)
        drawn += 1
    return drawn


def watch_leases(
    settings: Settings,
    out: TextIO,
    *,
    every_s: float,
    html: Path | None = None,
    metrics_url: str | None = None,
    refreshes: int | None = None,
    clear: bool = True,
) -> int:
    """The CLI's entry point: watch the configured table (or ``metrics_url``) until Ctrl-C."""
    clock = SystemClock()
    sample: Callable[[], Awaitable[Snapshot]]
    if metrics_url is not None:
        sample = MetricsSampler(metrics_url)
    else:
        from kcl_daemon.aws.clients import build_clients, client_settings_from
        from kcl_daemon.aws.kinesis import Kinesis
        from kcl_daemon.aws.lease_table import DynamoLeaseTable
        from kcl_daemon.config.slices import table_names

        table_name = settings.lease_table_name
        if table_name is None:
            raise ValueError("leases needs applicationName or tableName (validate_for_leases)")
        clients = build_clients(client_settings_from(settings))
        names = table_names(settings)
        table = DynamoLeaseTable(
            clients.dynamodb, table_name, heartbeat_table=None if names is None else names.worker_metrics
        )
        kinesis = Kinesis(clients.kinesis)
        from kcl_daemon.inspection.stream_shards import configured_shard_lister

        sample = TableSampler(
            table_name,
            lambda: table.list_leases_and_heartbeats(consistent=True),
            configured_shard_lister(settings.shards(), clients.kinesis, kinesis),
            clock,
            failover_s=settings.failover_s,
            cluster_separator=settings.lease_cluster_separator,
        )
    return asyncio.run(
        watch(sample, clock, out, every_s=every_s, html=html, refreshes=refreshes, clear=clear)
    )
