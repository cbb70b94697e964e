"""Smoke test for the benchmarks under bench/: each runs at a tiny size, exits 0 and prints its figures.

No timing is asserted: the figures are for people (bench/README.md), and machines are noisy.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.integration

BENCH = REPO / "bench"


def run_bench(script: str, *args: str) -> str:
    pytest.importorskip("moto.server", reason="the benchmarks need the local extra (moto)")
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_read_throughput_prints_both_figures_and_the_ratio() -> None:
    out = run_bench(
        "read_throughput.py", "--records", "200", "--shards", "2", "--runs", "1", "--deep-records", "0"
    )
    assert "200 records in 2 shard(s)" in out
    assert "baseline (raw boto3" in out and "kcl-daemon, start to all delivered" in out
    assert "ratio daemon/baseline" in out and "records/s" in out


def test_first_record_prints_in_process_and_cli_times() -> None:
    out = run_bench("first_record.py", "--records", "200", "--shards", "2", "--runs", "1", "--cli-runs", "1")
    assert "baseline (child's first reply + raw read)" in out
    assert "kcl-daemon in-process" in out and "ratio daemon/baseline" in out
    assert "kcl-daemon run --local" in out and "ms" in out


def test_metrics_overhead_prints_on_off_and_the_ratio() -> None:
    out = run_bench("metrics_overhead.py", "--batches", "20", "--records", "50", "--runs", "1")
    assert "metrics off (baseline)" in out and "metrics on" in out and "ratio on/off" in out


def test_status_page_prints_idle_and_looked_at_cpu_and_the_cost() -> None:
    out = run_bench("status_page.py", "--shards", "1", "--window-s", "2", "--rounds", "1", "--rate", "2")
    assert "nobody looks" in out and "1 request/s to /" in out and "ratio B/A" in out
    assert "the page's cost at 1 request/s" in out


def test_vs_java_without_java_prints_the_daemon_against_the_raw_loop() -> None:
    out = run_bench(
        "vs_java.py", "--no-java", "--scenario", "2:600:100", "--runs", "1", "--processors", "working"
    )
    assert "kcl-daemon against the raw GetRecords loop only" in out
    assert "raw loop" in out and "kcl-daemon" in out and "CPU-s/10k" in out and "peak RSS MB" in out
    assert "vs raw loop: records/s x" in out


def test_scaling_without_java_prints_every_figure_of_a_point(tmp_path: Path) -> None:
    out = run_bench(
        *("scaling.py", "--no-java", "--no-botocore", "--shards", "2", "--runs", "1", "--processors", "noop"),
        *("--backlog", "30", "--min-total", "60", "--idle-ms", "200", "--idle-s", "1"),
        *("--warmup-s", "0.5", "--steady-s", "1", "--out", str(tmp_path)),
    )
    assert "| 2 | noop | kcl-daemon |" in out and "idle GetRecords/shard-s" in out and "open fds" in out
    assert "daemon CPU ms per idle GetRecords call" in out
    assert "(memory) put in" in out  # GetRecords served from memory, the default
    assert "steady delivered / produced" in out and "dynalite % of a core" in out
    assert "drain_per_s >= 1.5 x Java" in out  # the goals per point
    assert (tmp_path / "scaling.json").exists() and (tmp_path / "scaling.md").exists()


def test_process_tree_prints_the_tree_of_kcl_daemon_with_lanes(tmp_path: Path) -> None:
    out = run_bench(
        *(
            "process_tree.py",
            "--variants",
            "kcl-daemon-lanes",
            "--lanes",
            "2",
            "--shards",
            "2",
            "--runs",
            "1",
        ),
        *(
            "--backlog",
            "30",
            "--min-total",
            "60",
            "--warmup-s",
            "0.5",
            "--steady-s",
            "1",
            "--out",
            str(tmp_path),
        ),
    )
    assert "| 2 | kcl-daemon-lanes |" in out and "drain tree CPU-s/10k" in out and "tree RSS MB" in out
    assert (tmp_path / "process_tree.json").exists() and (tmp_path / "process_tree.md").exists()


def test_lean_path_prints_every_candidate_against_botocore() -> None:
    out = run_bench("lean_path.py", "--calls", "5", "--rounds", "1", "--emulators", "kinesalite")
    assert "| botocore | " in out and "| kcl_daemon.aws.lean | " in out and "| http.client | " in out
    assert "| awscrt" in out and "| aiohttp+uvloop" in out and "/ botocore" in out  # or "not installed"


def test_dynamodb_cost_without_java_prints_units_per_lease_hour_and_dollars() -> None:
    out = run_bench(
        *("dynamodb_cost.py", "--no-java", "--leases", "2", "--workers", "1", "--modes", "ours-3x"),
        *("--window-s", "2", "--settle-s", "1", "--failover-ms", "1000"),
    )
    assert "| ours-3x | 2 | 1 |" in out and "calls/lease-h" in out
    assert "$1.25 per million write request units" in out and "ours-3x $/month" in out


def test_profile_retrieval_prints_cpu_per_10k_and_the_profile() -> None:
    out = run_bench("profile_retrieval.py", "--records", "400", "--shards", "2", "--top", "5")
    assert "CPU-s per 10k" in out
    assert "event loop thread, by tottime" in out
    # on the lean path (the default) the reads are awaited on the event loop: no read thread to profile
    assert "GetRecords threads: none (the reads ran on the event loop)" in out


def test_balance_prints_the_comparison_speed_cost_and_failover() -> None:
    out = run_bench("balance.py", "--quick", "--runs", "1")
    assert "scale-out" in out and "cooperative (grace 120 s)" in out
    assert "unowned leases over" in out and "x variance" in out
    assert "ratio" in out and "Failover of a crashed worker" in out
