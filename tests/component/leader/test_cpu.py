"""CPU of the daemon and its children (cgroup v2, v1, /proc), worker-metrics reports and lease throughput."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kcl_daemon.leader.cpu import CpuReading, CpuSampler, cgroup_reading, process_tree_reading
from kcl_daemon.leader.throughput import ThroughputTracker
from kcl_daemon.leader.worker_metrics import WorkerMetricsConfig, WorkerMetricsPublisher
from tests.support.clocks import FakeClock


def test_cgroup_v2_with_a_limit(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("200000 100000\n")
    (tmp_path / "cpu.stat").write_text("usage_usec 3000000\nuser_usec 2000000\n")
    assert cgroup_reading(tmp_path) == CpuReading(3.0, 2.0)
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_reading(tmp_path) is None  # no limit: measure the process tree instead


def test_cgroup_v1_with_a_limit(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpuacct").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "cpuacct" / "cpuacct.usage").write_text("1500000000\n")
    assert cgroup_reading(tmp_path) == CpuReading(1.5, 0.5)
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_reading(tmp_path) is None


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("children_files", [True, False], ids=["children files", "scan"])
def test_process_tree_counts_a_busy_child(children_files: bool) -> None:
    """The tree measured is a parent of our own that starts one busy child: the test process's tree
    (the emulators and daemons other tests of this worker started) gains and loses processes meanwhile."""
    busy = "import time\nwhile time.process_time() < 5: pass"
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {busy!r}])"]
    )
    try:
        before = process_tree_reading(parent.pid, children_files=children_files)
        assert before is not None
        # The child spins on CPU time, not wall time, so a loaded machine only makes the test slower.
        deadline = time.monotonic() + 20
        gained = 0.0
        while gained < 0.2 and time.monotonic() < deadline and parent.poll() is None:
            time.sleep(0.1)
            during = process_tree_reading(parent.pid, children_files=children_files)
            assert during is not None
            gained = during.cpu_seconds - before.cpu_seconds
    finally:
        _kill_children(parent.pid)
        parent.kill()
        parent.wait()
    assert gained >= 0.2


def test_sampler_percent() -> None:
    clock = FakeClock()
    readings = iter([CpuReading(10.0, 2.0), CpuReading(11.0, 2.0), None])
    sampler = CpuSampler(lambda: next(readings), clock.monotonic)
    assert sampler.sample() == 0.0
    clock.now += 1.0
    assert sampler.sample() == pytest.approx(50.0)
    assert sampler.sample() is None


def test_a_large_process_tree_is_read_less_often() -> None:
    clock = FakeClock()
    readings = iter([CpuReading(0.0, 1.0, processes=256), CpuReading(2.0, 1.0, processes=256)])
    sampler = CpuSampler(lambda: next(readings), clock.monotonic)
    assert sampler.due()
    assert sampler.sample() == 0.0
    clock.now += 1.0
    assert not sampler.due()  # 256 processes: a reading every 4 s
    clock.now += 3.0
    assert sampler.due()
    assert sampler.sample() == pytest.approx(50.0)  # the whole 4 s counted


def test_reports_average_samples_and_a_failed_interval_is_minus_one() -> None:
    clock = FakeClock()
    values = iter([CpuReading(0.0, 1.0), CpuReading(0.5, 1.0), CpuReading(1.0, 1.0)])
    sampler = CpuSampler(lambda: next(values), clock.monotonic)
    publisher = WorkerMetricsPublisher(
        None, WorkerMetricsConfig("w", history=2), clock, sampler, None, wall=lambda: 100.0
    )  # type: ignore[arg-type]
    publisher.capture()
    clock.now += 1
    publisher.capture()
    clock.now += 1
    publisher.capture()
    assert publisher.next_stats().stats == {"C": (33.333333,)}
    assert publisher.next_stats().stats == {"C": (33.333333, -1.0)}
    disabled = WorkerMetricsPublisher(
        None, WorkerMetricsConfig("w", disabled=True), clock, sampler, None, wall=lambda: 5.0
    )  # type: ignore[arg-type]
    stats = disabled.next_stats()
    assert (stats.stats, stats.operating_range, stats.last_update_s) == ({}, {}, 5.0)


def test_throughput_ema_per_renewal() -> None:
    clock = FakeClock()
    delivered = {"s": 0}
    tracker = ThroughputTracker(delivered.get, clock.monotonic)
    assert tracker.on_renew("s") is None
    clock.now += 2
    delivered["s"] = 4096
    assert tracker.on_renew("s") == pytest.approx(2.0)  # 4 KB in 2 s
    clock.now += 2
    delivered["s"] = 4096
    assert tracker.on_renew("s") == pytest.approx(1.0)  # EMA(0.5) of 0 and 2
    clock.now += 1
    delivered["s"] = 1024  # the consumer restarted: its counter starts again
    assert tracker.on_renew("s") == pytest.approx(1.0)
    assert tracker.on_renew("unknown") is None


def _kill_children(pid: int) -> None:
    """SIGKILL the children of ``pid`` (from /proc), before their parent."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(child), signal.SIGKILL)
