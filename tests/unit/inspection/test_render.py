"""The live view of `kcl-daemon leases --watch` and its HTML plot, rendered from fleet figures."""

from __future__ import annotations

from kcl_daemon.core.inspection.figures import fleet_figures
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber


def lease(key: str, owner: str | None, checkpoint: str = "TRIM_HORIZON") -> Lease:
    return Lease(key, ExtendedSequenceNumber(checkpoint), lease_owner=owner, lease_counter=1)


def test_screen_shows_figures_and_bars_most_loaded_first() -> None:
    from kcl_daemon.inspection.watch import Snapshot, render_screen

    figures = fleet_figures([lease("s0", "a-1"), lease("s1", "b-1"), lease("s2", "b-1")], total_shards=3)
    screen = render_screen(Snapshot("lease table t", figures), at="12:00:00", every_s=2)
    assert "leases 3, shards 3, workers 2, unclaimed 0, expired 0, finished 0, skew 1" in screen
    assert screen.index("b-1  " + "#" * 40 + " 2") < screen.index("a-1  " + "#" * 20 + " 1")


def test_plot_draws_a_step_line_per_worker_and_unclaimed() -> None:
    from kcl_daemon.inspection.plot import Frame, render_html

    frames = [Frame(0, {"w1": 2}, 2), Frame(10, {"w1": 2, "w<2>": 2}, 0)]
    page = render_html(frames)
    assert page.count("<polyline") == 3 and "w&lt;2&gt;" in page and "unclaimed" in page
    assert render_html([]).startswith("<!doctype html>")
