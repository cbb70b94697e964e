"""CPU utilization of this daemon *and its children*, in percent of the CPU it may use (0-100).

Java reports the CPU of the whole host (``/proc/stat``) or container; a multilang worker's work is done
by its record processors, which are child processes, so here:

* in a container with a CPU limit (cgroup v2 ``cpu.max``, or v1 ``cpu.cfs_quota_us`` /
  ``cpu.cfs_period_us``), the cgroup's own usage counter (``cpu.stat`` ``usage_usec`` /
  ``cpuacct.usage``) over the limit: that counts every process of the container;
* otherwise the process tree from ``/proc``: ``utime + stime`` of this process and of every live
  descendant, plus ``cutime + cstime`` (children already reaped), over the CPUs this process may run on.
  The tree is found through the kernel's ``/proc/<pid>/task/<tid>/children`` files, so a reading costs
  a few small reads per process of the tree, not one per process of the machine (scanning every
  process's ``stat`` was 14 % of an idle daemon's CPU at 64 shards on a busy host); a kernel without
  those files gets the scan.

:class:`CpuSampler` turns two readings into a percentage; the first call returns 0 (no interval yet),
as Java's does; ``due`` spaces the readings of a large process tree. A reading that fails returns None
(the reporter then writes -1).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_CLK_TCK: Final = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


#: A reading of the process tree costs a few reads per process: with more processes than this in the
#: tree, readings are spaced ``processes / PROCESSES_PER_READING_S`` seconds apart (at most
#: ``MAX_READING_SPACING_S``). The counters are cumulative, so a longer interval loses nothing of the
#: average the reports carry.
PROCESSES_PER_READING_S: Final = 64.0
MAX_READING_SPACING_S: Final = 5.0


@dataclass(frozen=True, slots=True)
class CpuReading:
    cpu_seconds: float  # CPU time used so far by what we measure
    capacity: float  # CPUs available to it
    processes: int = 1  # processes read to make it (the whole container counts as one)


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


def _read_small(path: str) -> bytes | None:
    """A /proc file's bytes (os-level: ``Path.read_text`` cost more than the read itself)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, 65536)
        while len(data) % 65536 == 0 and data:  # a full buffer: there may be more
            more = os.read(fd, 65536)
            if not more:
                break
            data += more
    except OSError:
        return None
    finally:
        os.close(fd)
    return data


def _stat_times(data: bytes) -> tuple[int, float, float]:
    """(ppid, own CPU seconds, reaped children's CPU seconds) from ``/proc/<pid>/stat``; the command
    name (field 2) may contain spaces and parentheses."""
    fields = data[data.rindex(b")") + 2 :].split()
    own = (int(fields[11]) + int(fields[12])) / _CLK_TCK
    reaped = (int(fields[13]) + int(fields[14])) / _CLK_TCK
    return int(fields[1]), own, reaped


def _tree_by_children_files(root: int, proc: str) -> list[int] | None:
    """``root`` and its live descendants from ``/proc/<pid>/task/<tid>/children`` (a few reads per
    process of the tree); None where the kernel offers no such file."""
    tree = [root]
    at = 0
    while at < len(tree):
        pid = tree[at]
        at += 1
        try:
            tasks = os.listdir(f"{proc}/{pid}/task")
        except OSError:
            continue  # gone meanwhile
        for task in tasks:
            data = _read_small(f"{proc}/{pid}/task/{task}/children")
            if data is None:
                if pid == root and not os.path.exists(f"{proc}/{pid}/task/{task}/children"):
                    return None
                continue
            tree.extend(int(child) for child in data.split())
    return tree


def _tree_by_scan(root: int, proc: str) -> dict[int, tuple[float, float]] | None:
    """The CPU times of ``root`` and its live descendants from every process's ``stat``."""
    parents: dict[int, int] = {}
    times: dict[int, tuple[float, float]] = {}
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        data = _read_small(f"{proc}/{name}/stat")
        if data is None:
            continue
        try:
            ppid, own, reaped = _stat_times(data)
        except (ValueError, IndexError):
            continue
        parents[int(name)] = ppid
        times[int(name)] = (own, reaped)
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
    return {pid: times[pid] for pid in tree}


def process_tree_reading(
    pid: int | None = None, proc: Path = Path("/proc"), *, children_files: bool = True
) -> CpuReading | None:
    """CPU seconds of ``pid`` (default: this process), its reaped children and its live descendants.

    The tree comes from the kernel's ``children`` files (only the tree's own files are read), or, where
    there are none (or ``children_files`` is False), from a scan of every process's ``stat``."""
    root = os.getpid() if pid is None else pid
    where = str(proc)
    tree = _tree_by_children_files(root, where) if children_files else None
    if tree is None:
        times = _tree_by_scan(root, where)
    else:
        times = {}
        for member in tree:
            data = _read_small(f"{where}/{member}/stat")
            if data is None:
                continue  # ended meanwhile
            try:
                _, own, reaped = _stat_times(data)
            except (ValueError, IndexError):
                continue
            times[member] = (own, reaped)
    if not times or root not in times:
        return None
    total = sum(own for own, _ in times.values()) + times[root][1]
    return CpuReading(total, _cpu_count(), len(times))


def default_reading() -> CpuReading | None:
    return cgroup_reading() or process_tree_reading()


class CpuSampler:
    """Percent utilization between consecutive calls (0 on the first)."""

    def __init__(self, read: Callable[[], CpuReading | None], monotonic: Callable[[], float]) -> None:
        self._read = read
        self._monotonic = monotonic
        self._last: tuple[float, CpuReading] | None = None

    def due(self) -> bool:
        """Whether a reading is due: always, but for a large process tree read less than a second ago
        (see :data:`PROCESSES_PER_READING_S`)."""
        last = self._last
        if last is None:
            return True
        spacing = min(last[1].processes / PROCESSES_PER_READING_S, MAX_READING_SPACING_S)
        return self._monotonic() - last[0] >= spacing

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
