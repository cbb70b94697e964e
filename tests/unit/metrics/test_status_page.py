"""The status page's renderers (kcl_daemon.metrics.status_page) and the snapshot's helpers
(kcl_daemon.core.worker.status): every shard listed, everything escaped, relative links only, the JSON keys."""

from __future__ import annotations

import html.parser
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.worker.health import Check, HealthReport
from kcl_daemon.core.worker.status import (
    FleetView,
    FleetWorker,
    ShardView,
    StatusSnapshot,
    WorkerView,
    cut_line,
    records_rate,
    snapshot_json,
    sparkline_points,
)
from kcl_daemon.metrics.status_page import render_html, render_json

HOSTILE = '<script>alert("x")</script>&"\''


def worker(**changes: object) -> WorkerView:
    fields: dict[str, object] = {
        "worker_id": "worker-a",
        "zone": "zone-1",
        "lease_mode": "3.x leader (CLIENT_VERSION_3X)",
        "leader": True,
        "leader_id": "worker-a",
        "phase": "running",
        "uptime_s": 3725.0,
        "pid": 4242,
        "liveness": HealthReport((Check("event-loop", True, "runs callbacks"),)),
        "readiness": HealthReport((Check("shards", False, "shardId-2 stalled"),)),
        "stream": "orders",
        "table": "orders-app",
        "restart_grace_s": 30.0,
    }
    fields.update(changes)
    return WorkerView(**fields)  # type: ignore[arg-type]


def shard(n: int, **changes: object) -> ShardView:
    fields: dict[str, object] = {
        "lease_key": f"shardId-00000000000{n}",
        "shard_id": f"shardId-00000000000{n}",
        "state": "processing",
        "millis_behind_latest": 1000 * n,
        "records_per_s": 2.5,
        "records_delivered": 100 + n,
        "checkpoint": "49590338271490256608559692538361571095921575989136588898",
        "checkpoint_age_s": 2.0,
        "child_pid": 5000 + n,
        "child_restarts": n,
        "last_stderr": None,
        "lag_history": (None, 0, 500, 1000 * n),
    }
    fields.update(changes)
    return ShardView(**fields)  # type: ignore[arg-type]


def snapshot(
    shards: tuple[ShardView, ...] = (), fleet: FleetView | None = None, **w: object
) -> StatusSnapshot:
    return StatusSnapshot(
        worker=worker(**w),
        shards=shards,
        fleet=fleet or FleetView(scanned_age_s=None),
        generated_at=1_800_000_000.0,
    )


FLEET = FleetView(
    scanned_age_s=3.0,
    total_leases=5,
    total_shards=5,
    workers=(
        FleetWorker("worker-a", "zone-1", 3, (2, 3, 3)),
        FleetWorker("worker-b", "zone-2", 1, (None, 1)),
    ),
    zones=(("zone-1", 3), ("zone-2", 1)),
    expired=(("shardId-000000000004", "worker-c"),),
    unowned=("shardId-000000000005",),
    expired_count=1,
    unowned_count=1,
)


class Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.refresh: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for name in ("href", "src", "action"):
            if found.get(name) is not None:
                self.links.append(str(found[name]))
        if tag == "meta" and found.get("http-equiv") == "refresh":
            self.refresh.append(str(found.get("content")))
        self.scripts += tag == "script"


def test_every_shard_is_listed_with_its_figures() -> None:
    page = render_html(snapshot(tuple(shard(n) for n in range(4)), FLEET)).decode()
    for n in range(4):
        assert f"shardId-00000000000{n}" in page
        assert f">{1000 * n}</td>" in page  # the lag
        assert f">{5000 + n}</td>" in page  # the child's pid
    assert page.count("<svg") == 4 + 2  # a lag sparkline per shard, a lease one per worker
    assert "processing" in page and ">2.5</td>" in page and "1 h 2 min" in page
    assert "shardId-000000000004</span> (worker-c)" in page and "shardId-000000000005" in page


def test_the_page_loads_nothing_runs_nothing_and_links_relatively() -> None:
    parser = Links()
    parser.feed(render_html(snapshot((shard(1),), FLEET)).decode())
    assert parser.scripts == 0
    assert parser.refresh == ["5"]  # the same address, whatever prefix a proxy put in front
    assert sorted(parser.links) == ["healthz", "metrics", "readyz", "status.json"]


def test_everything_from_the_worker_is_escaped() -> None:
    hostile = snapshot(
        (shard(1, shard_id=HOSTILE, lease_key=HOSTILE, last_stderr=HOSTILE, note=HOSTILE, state=HOSTILE),),
        FleetView(
            scanned_age_s=1.0,
            workers=(FleetWorker(HOSTILE, HOSTILE, 1),),
            expired=((HOSTILE, HOSTILE),),
            unowned=(HOSTILE,),
            expired_count=1,
            unowned_count=1,
        ),
        worker_id=HOSTILE,
        zone=HOSTILE,
        lease_mode=HOSTILE,
        leader=False,
        leader_id=HOSTILE,
        stream=HOSTILE,
        table=HOSTILE,
        readiness=HealthReport((Check(HOSTILE, False, HOSTILE),)),
    )
    page = render_html(hostile).decode()
    assert "<script" not in page and 'alert("x")' not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&quot;&#x27;" in page
    parser = Links()
    parser.feed(page)
    assert parser.scripts == 0


def test_no_shard_and_no_scan_say_so() -> None:
    page = render_html(snapshot(leader=None, leader_id=None, lease_mode="2.x taker")).decode()
    assert "holds no lease now" in page
    assert "only the leader reads the whole lease table" in page
    assert "every worker takes leases (2.x)" in page


def test_the_json_has_the_documented_keys() -> None:
    body = json.loads(render_json(snapshot((shard(1), shard(2, last_stderr="boom")), FLEET)))
    assert set(body) == {"generatedAt", "refreshSeconds", "sampleEverySeconds", "worker", "shards", "fleet"}
    assert set(body["worker"]) == {
        "workerId", "zone", "stream", "leaseTable", "leaseMode", "leader", "leaderId", "phase",
        "uptimeSeconds", "pid", "restartGraceSeconds", "keepingLeasesForRestart", "health", "ready",
    }  # fmt: skip
    assert set(body["shards"][0]) == {
        "leaseKey", "shardId", "state", "millisBehindLatest", "recordsPerSecond", "recordsDelivered",
        "checkpoint", "checkpointAgeSeconds", "childPid", "childRestarts", "lastStderrLine", "note",
        "lagHistory",
    }  # fmt: skip
    assert set(body["fleet"]) == {
        "scannedAgeSeconds", "totalLeases", "totalShards", "finishedLeases", "workers", "zones",
        "expiredCount", "unownedCount", "expiredLeases", "unownedLeases",
    }  # fmt: skip
    assert [s["shardId"] for s in body["shards"]] == ["shardId-000000000001", "shardId-000000000002"]
    assert body["shards"][1]["lastStderrLine"] == "boom"
    assert body["worker"]["ready"] == {
        "status": "fail",
        "checks": [{"name": "shards", "ok": False, "detail": "shardId-2 stalled"}],
    }
    assert body["fleet"]["expiredLeases"] == [{"leaseKey": "shardId-000000000004", "owner": "worker-c"}]
    assert snapshot_json(snapshot())["shards"] == []


@pytest.mark.parametrize(
    ("count_now", "now", "samples", "expected"),
    [
        (100, 10.0, [(0.0, 0), (5.0, 50)], 10.0),  # against the newest sample at least 1 s old
        (100, 5.5, [(0.0, 0), (5.0, 50)], 100 / 5.5),  # the newest one is too recent: the one before
        (10, 10.0, [(5.0, 50)], None),  # the count went down: the shard's task started again
        (10, 10.0, [], None),
        (10, 10.0, [(9.5, 0)], None),
    ],
)
def test_records_rate(
    count_now: int, now: float, samples: list[tuple[float, int]], expected: float | None
) -> None:
    assert records_rate(count_now, now, samples) == expected


def test_sparkline_points_break_on_unknown_values_and_keep_zero_at_the_bottom() -> None:
    assert sparkline_points([], 100, 20) == []
    assert sparkline_points([None, None], 100, 20) == []
    assert sparkline_points([0, 0, 0], 100, 20) == [[(0, 20), (50, 20), (100, 20)]]
    assert sparkline_points([1, None, 4, 2], 30, 20) == [[(0, 15)], [(20, 0), (30, 10)]]
    assert sparkline_points([-5, 3], 10, 20, floor_max=6) == [[(0, 20), (10, 10)]]


@given(st.lists(st.one_of(st.none(), st.integers(0, 10**9)), max_size=80))
def test_sparkline_points_stay_in_the_box(values: list[int | None]) -> None:
    for segment in sparkline_points(values, 120, 22):
        for x, y in segment:
            assert 0 <= x <= 120 and 0 <= y <= 22


def test_a_stderr_line_is_cut_and_cleaned() -> None:
    assert cut_line(None) is None
    assert cut_line("a\tb\x1b[31mc\n") == "a b [31mc"
    long = cut_line("x" * 1000)
    assert long is not None and len(long) == 240 and long.endswith("…")


def test_a_long_history_is_thinned_to_31_points_ending_with_the_newest() -> None:
    history = (*([None] * 20), *range(41))  # 61 samples: the page's five minutes and now
    page = render_html(snapshot((shard(1, lag_history=history),))).decode()
    points = page.split('<polyline points="', 1)[1].split('"', 1)[0].split()
    assert len(points) == 21 and points[-1] == "120,0"  # 31 kept, the first 10 of them unknown
