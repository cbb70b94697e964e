"""Run comparisons and present them: a text table, JSON, and a self-contained HTML timeline.

The HTML picture is inline SVG (no plotting library): for each run, leases per zone over time, and the
band between the least and the most loaded worker; small fleets also get one thin line per worker.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import replace

from kcl_daemon.sim.engine import simulate
from kcl_daemon.sim.model import FleetConfig, Result
from kcl_daemon.sim.policies import by_name
from kcl_daemon.sim.scenarios import Size, build


def compare(
    scenarios: Sequence[str],
    policies: Sequence[str],
    size: Size,
    fleet: FleetConfig,
    seed: int = 0,
    sizes: dict[str, Size] | None = None,
) -> list[Result]:
    """Every policy through every scenario (same seed, same fleet)."""
    results = []
    for name in scenarios:
        scenario = build(name, (sizes or {}).get(name, size), fleet, seed)
        for policy in policies:
            result = simulate(scenario, by_name(policy, seed), fleet, seed)
            if fleet.restart_grace_s > 0 and policy == "cooperative":
                result.policy = f"cooperative (grace {fleet.restart_grace_s:g} s)"
            results.append(result)
    return results


def with_grace(fleet: FleetConfig, grace_s: float) -> FleetConfig:
    return replace(fleet, restart_grace_s=grace_s)


COLUMNS = (
    ("scenario", 12),
    ("policy", 18),
    ("balanced after s", 16),
    ("moves (bound)", 13),
    ("hand-offs", 9),
    ("dup-risk", 8),
    ("unserved lease-s", 16),
    ("leases min-max", 14),
    ("per zone", 18),
    ("KB/s min-max", 13),
    ("DDB units/lease-h", 17),
    ("decider ms", 10),
)


def _row(r: Result, baseline: Result | None) -> list[str]:
    ttb = "never" if r.time_to_balance_s is None else f"{r.time_to_balance_s:.0f}"
    ddb = f"{r.ddb_units_per_lease_hour:.0f}"
    if baseline is not None and baseline is not r and baseline.ddb_units_per_lease_hour > 0:
        ddb += f" ({r.ddb_units_per_lease_hour / baseline.ddb_units_per_lease_hour:.2f}x)"
    zones = "/".join(str(v) for v in r.zone_leases.values())
    return [
        r.scenario,
        r.policy,
        ttb,
        f"{r.moves} ({r.moves_lower_bound})",
        str(r.handoffs),
        str(r.duplicate_risk_moves),
        f"{r.unserved_lease_s:.0f}",
        f"{r.min_leases}-{r.max_leases}",
        zones if len(zones) <= 18 else zones[:17] + "…",
        f"{r.min_load_kbps:.0f}-{r.max_load_kbps:.0f}",
        ddb,
        f"{r.decider_ms_per_round:.1f}",
    ]


def table(results: Iterable[Result], markdown: bool = False) -> str:
    """The comparison table; DynamoDB units also as a ratio to the 2.x run of the same scenario."""
    results = list(results)
    baselines = {r.scenario: r for r in results if r.policy == "2.x"}
    rows = [_row(r, baselines.get(r.scenario)) for r in results]
    headers = [name for name, _ in COLUMNS]
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(w, len(h), *(len(row[i]) for row in rows)) for i, (h, w) in enumerate(COLUMNS)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(line.rstrip() for line in out)


def to_json(results: Iterable[Result], timeline: bool = False) -> list[dict[str, object]]:
    out = []
    for r in results:
        item: dict[str, object] = {
            "scenario": r.scenario,
            "policy": r.policy,
            "timeToBalanceSeconds": r.time_to_balance_s,
            "moves": r.moves,
            "movesLowerBound": r.moves_lower_bound,
            "handoffs": r.handoffs,
            "duplicateRiskMoves": r.duplicate_risk_moves,
            "unservedLeaseSeconds": r.unserved_lease_s,
            "leasesPerWorker": {"min": r.min_leases, "max": r.max_leases},
            "leasesPerZone": r.zone_leases,
            "loadPerWorkerKBps": {"min": r.min_load_kbps, "max": r.max_load_kbps},
            "dynamoDbPerLeaseHour": {
                "readUnits": r.ddb_read_units_per_lease_hour,
                "writeUnits": r.ddb_write_units_per_lease_hour,
            },
            "deciderMillisPerRound": r.decider_ms_per_round,
            "deciderMillisMax": r.decider_ms_max,
            "deciderRounds": r.rounds,
        }
        if timeline:
            item["timeline"] = [
                {"t": t, "zones": zones, "minPerWorker": lo, "maxPerWorker": hi}
                for t, zones, lo, hi in r.timeline
            ]
        out.append(item)
    return out


_PALETTE = ("#1b6ca8", "#d1495b", "#66a182", "#edae49", "#8d6a9f", "#00798c", "#30638e")


def _svg(r: Result, width: int = 560, height: int = 220) -> str:
    pad = 36
    if not r.timeline:
        return "<p>no samples</p>"
    t_max = max(t for t, *_ in r.timeline) or 1.0
    zones = sorted({z for _, zs, _, _ in r.timeline for z in zs})
    y_max = max([max(zs.values(), default=0) for _, zs, _, _ in r.timeline] + [1])

    def x(t: float) -> float:
        return pad + (width - 2 * pad) * t / t_max

    def y(v: float) -> float:
        return height - pad - (height - 2 * pad) * v / y_max

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">']
    parts.append(f'<rect x="0" y="0" width="{width}" height="{height}" fill="white" stroke="#ccc"/>')
    for i, zone in enumerate(zones):
        points = " ".join(f"{x(t):.1f},{y(zs.get(zone, 0)):.1f}" for t, zs, _, _ in r.timeline)
        colour = _PALETTE[i % len(_PALETTE)]
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>')
        parts.append(
            f'<text x="{width - pad + 2}" y="{y(r.timeline[-1][1].get(zone, 0)):.1f}" font-size="10" '
            f'fill="{colour}">{html.escape(zone)}</text>'
        )
    per_worker_max = max([hi for *_, hi in r.timeline] + [1])
    scale = (height - 2 * pad) / per_worker_max
    band_top = " ".join(f"{x(t):.1f},{height - pad - hi * scale:.1f}" for t, _, _, hi in r.timeline)
    band_bottom = " ".join(
        f"{x(t):.1f},{height - pad - lo * scale:.1f}" for t, _, lo, _ in reversed(r.timeline)
    )
    parts.append(
        f'<polygon fill="#999" fill-opacity="0.25" stroke="none" points="{band_top} {band_bottom}"/>'
    )
    parts.append(
        f'<text x="{pad}" y="14" font-size="11">leases per zone (lines, 0-{y_max}); per worker min-max '
        f"(grey band, 0-{per_worker_max}); t = 0-{t_max:.0f} s</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def html_page(results: Iterable[Result], title: str = "kcl-daemon simulate") -> str:
    sections = []
    for r in results:
        sections.append(f"<h3>{html.escape(r.scenario)} - {html.escape(r.policy)}</h3>{_svg(r)}")
    body = "\n".join(sections)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
        f"<body style='font-family:sans-serif'><h2>{html.escape(title)}</h2>\n{body}\n</body></html>\n"
    )
