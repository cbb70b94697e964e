"""CPU utilization of this daemon *and its children*, in percent of the CPU it may use (0-100).

Java reports the CPU of the whole host (``/proc/stat``) or container; a multilang worker's work is done
by its record processors, which are child processes, so here:

* in a container with a CPU limit (cgroup v2 ``cpu.max``, or v1 ``cpu.cfs_quota_us`` /
  ``cpu.cfs_period_us``), the cgroup's own usage counter (``cpu.stat`` ``usage_usec`` /
  ``cpuacct.usage``) over the limit: that counts every process of the container;
* otherwise the process tree from ``/proc``: ``utime + stime`` of this process and of every live
  descendant, plus ``cutime + cstime`` (children already reaped), over the CPUs this process may run on.

:class:`CpuSampler` turns two readings into a percentage; the first call returns 0 (no interval yet),
as Java's does. A reading that fails returns None (the reporter then writes -1).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_CLK_TCK: Final = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True, slots=True)
class CpuReading:
    cpu_seconds: float  # CPU time used so far by what we measure
    capacity: float  # CPUs available to it


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _cpu_count() -> float:
    try:
        return float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return float(os.cpu_count() or 1)


def cgroup_reading(root: Path = Path("/sys/fs/cgroup")) -> CpuReading | None:
    """The container's usage over its CPU limit; None when there is no limit (or no cgroup)."""
    cpu_max = _read(root / "cpu.max")  # v2: "<quota|max> <period>"
    if cpu_max is not None:
        quota, _, period = cpu_max.strip().partition(" ")
        stat = _read(root / "cpu.stat")
        if quota == "max" or stat is None:
            return None
        usage = next((line.split()[1] for line in stat.splitlines() if line.startswith("usage_usec ")), None)
        if usage is None:
            return None
        return CpuReading(int(usage) / 1e6, int(quota) / int(period or 100000))
    quota_v1 = _read(root / "cpu" / "cpu.cfs_quota_us")
    period_v1 = _read(root / "cpu" / "cpu.cfs_period_us")
    usage_v1 = _read(root / "cpuacct" / "cpuacct.usage") or _read(root / "cpu" / "cpuacct.usage")
    if quota_v1 is None or period_v1 is None or usage_v1 is None or int(quota_v1) <= 0:
        return None
    return CpuReading(int(usage_v1) / 1e9, int(quota_v1) / int(period_v1))


def _stat_fields(text: str) -> list[str]:
    # /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may contain spaces and parentheses.
    return text[text.rindex(")") + 2 :].split()


def process_tree_reading(pid: int | None = None, proc: Path = Path("/proc")) -> CpuReading | None:
    """CPU seconds of ``pid`` (default: this process), its reaped children and its live descendants."""
    root = os.getpid() if pid is None else pid
    parents: dict[int, int] = {}
    times: dict[int, tuple[float, float]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        text = _read(entry / "stat")
        if text is None:
            continue
        try:
            fields = _stat_fields(text)
            ppid = int(fields[1])
            own = (int(fields[11]) + int(fields[12])) / _CLK_TCK
            reaped = (int(fields[13]) + int(fields[14])) / _CLK_TCK
        except (ValueError, IndexError):
            continue
        parents[int(entry.name)] = ppid
        times[int(entry.name)] = (own, reaped)
    if root not in times:
        return None
    tree = {root}
    changed = True
    while changed:
        changed = False
        for child, parent in parents.items():
            if parent in tree and child not in tree:
                tree.add(child)
                changed = True
    total = sum(times[p][0] for p in tree) + times[root][1]
    return CpuReading(total, _cpu_count())


def default_reading() -> CpuReading | None:
    return cgroup_reading() or process_tree_reading()


class CpuSampler:
    """Percent utilization between consecutive calls (0 on the first)."""

    def __init__(self, read: Callable[[], CpuReading | None], monotonic: Callable[[], float]) -> None:
        self._read = read
        self._monotonic = monotonic
        self._last: tuple[float, CpuReading] | None = None

    def sample(self) -> float | None:
        try:
            reading = self._read()
        except (OSError, ValueError):
            reading = None
        now = self._monotonic()
        if reading is None:
            return None
        last, self._last = self._last, (now, reading)
        if last is None or now <= last[0]:
            return 0.0
        used = max(reading.cpu_seconds - last[1].cpu_seconds, 0.0)
        return min(100.0, 100.0 * used / ((now - last[0]) * max(reading.capacity, 1e-9)))
