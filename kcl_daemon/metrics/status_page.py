"""The status page's two renderings of a :class:`~kcl_daemon.core.worker.status.StatusSnapshot`: HTML and JSON.

Pure functions, no I/O. The HTML is complete on its own: no JavaScript, no stylesheet or font to fetch,
the sparklines inline SVG; it reloads itself (``<meta http-equiv="refresh">``, the same address) and
every link is relative (``status.json``, ``metrics``), so it works as it is behind a reverse proxy that
serves the port under a path prefix. A text browser or ``curl`` shows the shard ids and figures as
table cells. Every value from the worker is escaped (:func:`html.escape`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from html import escape

import orjson

from kcl_daemon.core.worker.health import HealthReport
from kcl_daemon.core.worker.status import ShardView, StatusSnapshot, snapshot_json, sparkline_points

SPARK_W = 120
SPARK_H = 22
#: at most this many points per sparkline (4 pixels apart): older samples are thinned, the newest kept
SPARK_POINTS = 31

_STYLE = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.2em 2em;color:#1d2733}
body{background:#f7f8fa}
h1{font-size:1.35em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.4em 0 .4em}
.meta{color:#5b6675;margin:0}a{color:#1f5fbf}
table{border-collapse:collapse;background:#fff;box-shadow:0 0 0 1px #dde2e8}
th,td{padding:.3em .7em;text-align:left;vertical-align:top;border-bottom:1px solid #e8ecf0}
thead th{background:#eef1f5;font-weight:600;white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.kv th{background:#eef1f5;width:11em;font-weight:600}
.ok{color:#18794e;font-weight:600}.fail{color:#c0362c;font-weight:600}.dim{color:#8a94a3}
.note{color:#9a5b00}.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:13px}
tbody td{vertical-align:middle}.kv td{vertical-align:top}
.stderr{max-width:28em;overflow-wrap:anywhere}td.id{white-space:nowrap}summary{color:#5b6675}
svg{vertical-align:middle}polyline{fill:none;stroke:#1f5fbf;stroke-width:1.5}
ul.checks{margin:0;padding-left:1.1em}
"""


def render_json(snapshot: StatusSnapshot) -> bytes:
    """``/status.json``: the snapshot's JSON (see :func:`kcl_daemon.core.worker.status.snapshot_json`)."""
    return orjson.dumps(snapshot_json(snapshot), option=orjson.OPT_INDENT_2) + b"\n"


def render_html(snapshot: StatusSnapshot) -> bytes:
    """``/``: the page."""
    w = snapshot.worker
    title = f"kcl-daemon {w.worker_id}"
    parts = [
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="refresh" content="{int(snapshot.refresh_s)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>kcl-daemon &middot; {_e(w.worker_id)}</h1>",
        '<p class="meta">',
        f"stream {_e(w.stream or '-')} &middot; lease table {_e(w.table or '-')} &middot; ",
        f'<span id="generated">generated {_e(_clock(snapshot.generated_at))}</span>, ',
        f"reloads every {int(snapshot.refresh_s)} s &middot; ",
        '<a href="status.json">status.json</a> &middot; <a href="metrics">metrics</a> &middot; ',
        '<a href="healthz">healthz</a> &middot; <a href="readyz">readyz</a></p>',
        *_worker(snapshot),
        *_shards(snapshot),
        *_fleet(snapshot),
        "</body></html>\n",
    ]
    return "".join(parts).encode()


# -- sections --------------------------------------------------------------------------------------


def _worker(snapshot: StatusSnapshot) -> Iterable[str]:
    w = snapshot.worker
    if w.leader is None:
        leader = "no leader: every worker takes leases (2.x)"
    elif w.leader:
        leader = '<span class="ok">this worker</span>'
    else:
        leader = f"no; the leader is {_e(w.leader_id)}" if w.leader_id else "no; no leader seen yet"
    grace = "off" if w.restart_grace_s <= 0 else f"{_num(w.restart_grace_s)} s"
    if w.keeping_leases:
        grace += ' <span class="note">(in progress: the leases are kept for this worker)</span>'
    rows = [
        ("worker id", _e(w.worker_id)),
        ("zone", _e(w.zone) if w.zone else '<span class="dim">none</span>'),
        ("lease mode", _e(w.lease_mode)),
        ("leader", leader),
        ("phase", _e(w.phase)),
        ("uptime", _e(_duration(w.uptime_s))),
        ("pid", str(int(w.pid))),
        ("restart grace", grace),
        ("health (/healthz)", _report(w.liveness, folded=True)),
        ("ready (/readyz)", _report(w.readiness, folded=False)),
    ]
    yield '<h2>Worker</h2><table class="kv" id="worker">'
    for name, value in rows:
        yield f"<tr><th>{name}</th><td>{value}</td></tr>"
    yield "</table>"


def _report(report: HealthReport, *, folded: bool) -> str:
    """The verdict, every failing check, and the passing ones (folded away when ``folded``)."""
    verdict = '<span class="ok">ok</span>' if report.ok else '<span class="fail">fail</span>'
    failing = [c for c in report.checks if not c.ok]
    passing = [c for c in report.checks if c.ok]
    shown = "".join(f'<li><span class="fail">{_e(c.name)}</span>: {_e(c.detail)}</li>' for c in failing)
    out = f'{verdict}<ul class="checks">{shown}</ul>' if failing else verdict
    if passing:
        items = "".join(f'<li><span class="ok">{_e(c.name)}</span>: {_e(c.detail)}</li>' for c in passing)
        out += (
            f"<details{'' if folded else ' open'}><summary>{len(passing)} check(s) pass</summary>"
            f'<ul class="checks">{items}</ul></details>'
        )
    return out


_SHARD_HEAD = (
    "shard",
    "state",
    "lag (ms)",
    "lag, last minutes",
    "records/s",
    "records",
    "checkpoint",
    "checkpointed",
    "child pid",
    "restarts",
    "last stderr line",
)


def _shards(snapshot: StatusSnapshot) -> Iterable[str]:
    shards = snapshot.shards
    yield f'<h2>Shards held <span class="dim">({len(shards)})</span></h2>'
    if not shards:
        yield '<p class="dim" id="shards">This worker holds no lease now.</p>'
        return
    span = _duration(snapshot.sample_every_s * max(len(shards[0].lag_history) - 1, 0))
    yield '<table id="shards"><thead><tr>'
    yield "".join(f"<th>{_e(h)}</th>" for h in _SHARD_HEAD)
    yield "</tr></thead><tbody>"
    for shard in shards:
        yield _shard_row(shard, span)
    yield "</tbody></table>"


def _shard_row(s: ShardView, span: str) -> str:
    note = f'<br><span class="note">{_e(s.note)}</span>' if s.note else ""
    state_class = "fail" if s.state in ("parked", "restarting") else ""
    cells = [
        f'<td class="mono id">{_e(s.shard_id)}</td>',
        f'<td><span class="{state_class}">{_e(s.state)}</span>{note}</td>',
        f'<td class="n">{_opt_int(s.millis_behind_latest)}</td>',
        f"<td>{_spark(s.lag_history, f'millisBehindLatest of {s.shard_id} over {span}')}</td>",
        f'<td class="n">{_rate(s.records_per_s)}</td>',
        f'<td class="n">{int(s.records_delivered)}</td>',
        f'<td class="mono">{_e(_short_seq(s.checkpoint))}</td>',
        f'<td class="n">{_ago(s.checkpoint_age_s)}</td>',
        f'<td class="n">{_opt_int(s.child_pid)}</td>',
        f'<td class="n">{int(s.child_restarts)}</td>',
        f'<td class="stderr mono">{_e(s.last_stderr) if s.last_stderr else _dash()}</td>',
    ]
    return f'<tr data-lease="{_e(s.lease_key)}">' + "".join(cells) + "</tr>"


def _fleet(snapshot: StatusSnapshot) -> Iterable[str]:
    f = snapshot.fleet
    yield '<h2>Fleet <span class="dim">(this worker\'s last read of the lease table)</span></h2>'
    if f.scanned_age_s is None:
        yield (
            '<p class="dim" id="fleet">Not seen: in KCL 3.x mode only the leader reads the whole lease '
            "table; open the leader's page (or run kcl-daemon leases).</p>"
        )
        return
    shards = "" if f.total_shards is None else f", {int(f.total_shards)} shards in the stream"
    yield (
        f'<p class="meta" id="fleet">read {_e(_duration(f.scanned_age_s))} ago: {int(f.total_leases)} '
        f"leases{shards}, {len(f.workers)} workers, {int(f.unowned_count)} unowned, "
        f"{int(f.expired_count)} expired, "
        f"{int(f.finished)} finished</p>"
    )
    yield "<table><thead><tr><th>worker</th><th>zone</th><th>leases</th><th>leases, last minutes</th>"
    yield "</tr></thead><tbody>"
    me = snapshot.worker.worker_id
    # one scale for every worker's line, so that they compare at a glance
    top = max((v for w in f.workers for v in w.history if v is not None), default=1)
    for worker in f.workers:
        mark = ' <span class="dim">(this worker)</span>' if worker.worker_id == me else ""
        if worker.worker_id == snapshot.worker.leader_id:
            mark += ' <span class="ok">leader</span>'
        label = f"leases of {worker.worker_id}"
        yield (
            f'<tr><td class="mono">{_e(worker.worker_id)}{mark}</td><td>{_e(worker.zone)}</td>'
            f'<td class="n">{int(worker.leases)}</td><td>{_spark(worker.history, label, top)}</td></tr>'
        )
    yield "</tbody></table>"
    if f.zones:
        zones = ", ".join(f"{_e(zone)}: {int(count)}" for zone, count in f.zones)
        yield f'<p class="meta">leases per zone: {zones}</p>'
    if f.expired:
        listed = ", ".join(f'<span class="mono">{_e(k)}</span> ({_e(o)})' for k, o in f.expired)
        more = _more(f.expired_count, len(f.expired))
        yield f'<p><span class="fail">expired</span> (owner not renewing): {listed}{more}</p>'
    if f.unowned:
        listed = ", ".join(f'<span class="mono">{_e(k)}</span>' for k in f.unowned)
        yield f'<p><span class="note">unowned</span>: {listed}{_more(f.unowned_count, len(f.unowned))}</p>'


def _more(count: int, listed: int) -> str:
    return f" and {int(count) - listed} more" if count > listed else ""


# -- small pieces ----------------------------------------------------------------------------------


def _spark(values: Sequence[float | None], label: str, top: float = 1.0) -> str:
    """An inline SVG sparkline of ``values`` (scaled to their maximum, at least ``top``)."""
    segments = sparkline_points(_thin(values, SPARK_POINTS), SPARK_W, SPARK_H, floor_max=top)
    if not segments:
        return _dash()
    lines = "".join(
        '<polyline points="' + " ".join([f"{x},{y}" for x, y in seg]) + '"/>'
        if len(seg) > 1
        else f'<circle cx="{seg[0][0]}" cy="{seg[0][1]}" r="1.5" fill="#1f5fbf"/>'
        for seg in segments
    )
    return (
        f'<svg width="{SPARK_W}" height="{SPARK_H + 2}" viewBox="0 -1 {SPARK_W} {SPARK_H + 2}" role="img" '
        f'aria-label="{_e(label)}"><title>{_e(label)}</title>{lines}</svg>'
    )


def _thin(values: Sequence[float | None], most: int) -> Sequence[float | None]:
    """Every n-th value, ending with the newest, so that at most ``most`` remain."""
    if len(values) <= most:
        return values
    step = -(-len(values) // most)
    return list(values[(len(values) - 1) % step :: step])


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _dash() -> str:
    return '<span class="dim">-</span>'


def _opt_int(value: int | None) -> str:
    return _dash() if value is None else str(int(value))


def _rate(value: float | None) -> str:
    if value is None:
        return _dash()
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def _num(value: float) -> str:
    return f"{value:g}"


def _ago(seconds: float | None) -> str:
    return _dash() if seconds is None else f"{_e(_duration(seconds))} ago"


def _short_seq(checkpoint: str | None) -> str:
    """A long sequence number is shown by its last digits (the full one is in status.json)."""
    if checkpoint is None:
        return "-"
    return checkpoint if len(checkpoint) <= 16 else "…" + checkpoint[-12:]


def _duration(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    return f"{hours // 24} d {hours % 24} h"


def _clock(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
