"""Leases per worker over time as one self-contained HTML page (inline SVG, no scripts, no downloads).

Pure: a list of :class:`Frame` in, a string out. One step line per worker (a lease count holds until the
next frame), plus unclaimed leases dashed, so a rebalance - a worker joining, one killed and its leases
taken over - can be watched by reloading the page while ``kcl-daemon leases --watch --html`` runs.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

_WIDTH, _HEIGHT, _LEFT, _RIGHT, _TOP, _BOTTOM = 900, 360, 50, 220, 20, 40
_COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
    "#17becf",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Frame:
    """One observation: when (epoch seconds), leases per worker, unclaimed leases."""

    at_s: float
    per_worker: Mapping[str, int] = field(default_factory=dict)
    unclaimed: int = 0


def _points(
    frames: Sequence[Frame],
    value: Callable[[Frame], int],
    x: Callable[[float], float],
    y: Callable[[float], float],
) -> str:
    """A step line: each count holds until the next frame."""
    points: list[str] = []
    for i, frame in enumerate(frames):
        if i:
            points.append(f"{x(frame.at_s):.1f},{y(value(frames[i - 1])):.1f}")
        points.append(f"{x(frame.at_s):.1f},{y(value(frame)):.1f}")
    return " ".join(points)


def render_html(frames: Sequence[Frame], *, title: str = "leases per worker") -> str:
    workers = sorted({worker for frame in frames for worker in frame.per_worker})
    start = frames[0].at_s if frames else 0.0
    end = max(frames[-1].at_s if frames else 1.0, start + 1.0)
    top = max([1, *(max(f.per_worker.values(), default=0) for f in frames), *(f.unclaimed for f in frames)])
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM

    def x(at_s: float) -> float:
        return _LEFT + (at_s - start) / (end - start) * plot_w

    def y(count: float) -> float:
        return _TOP + plot_h - count / top * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}"'
        ' font-family="sans-serif" font-size="12">',
        f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_LEFT + plot_w}" y2="{_TOP + plot_h}" stroke="#000"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + plot_h}" stroke="#000"/>',
    ]
    for tick in sorted({0, top // 2, top}):
        parts.append(f'<text x="{_LEFT - 8}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick}</text>')
    parts.append(
        f'<text x="{_LEFT}" y="{_HEIGHT - 12}">0 s</text>'
        f'<text x="{_LEFT + plot_w}" y="{_HEIGHT - 12}" text-anchor="end">{end - start:.0f} s</text>'
    )
    for index, worker in enumerate(workers):
        colour = _COLOURS[index % len(_COLOURS)]
        points = _points(frames, lambda f, w=worker: f.per_worker.get(w, 0), x, y)  # type: ignore[misc]
        label_y = _TOP + 14 + 16 * index
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}">'
            f"<title>{html.escape(worker)}</title></polyline>"
            f'<text x="{_LEFT + plot_w + 10}" y="{label_y}" fill="{colour}">{html.escape(worker)}</text>'
        )
    if any(frame.unclaimed for frame in frames):
        points = _points(frames, lambda f: f.unclaimed, x, y)
        label_y = _TOP + 14 + 16 * len(workers)
        parts.append(
            f'<polyline fill="none" stroke="#999" stroke-dasharray="4 3" points="{points}"/>'
            f'<text x="{_LEFT + plot_w + 10}" y="{label_y}" fill="#999">unclaimed</text>'
        )
    parts.append("</svg>")
    when = datetime.fromtimestamp(frames[-1].at_s, UTC).isoformat(timespec="seconds") if frames else "-"
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title></head><body>\n"
        f"<h1>{html.escape(title)}</h1>\n<p>{len(frames)} observation(s), last at {when}; "
        "reload the page to update.</p>\n" + "\n".join(parts) + "\n</body></html>\n"
    )
