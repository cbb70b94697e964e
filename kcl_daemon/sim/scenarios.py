"""The simulator's scenarios, each built from (shards, workers, zones, seed) at any scale.

Worker ids follow the ``<cluster>-<host>`` convention (contract §10.1): ``<zone>-w<n>``; zones are
``z1``, ``z2``, ... (``c1``, ``c2`` for the two clusters of the scale-out). Scenarios that start from
a steady fleet give every shard an owner
at t=0, spread evenly (round-robin over workers, so zones are even too).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kcl_daemon.sim.model import Event, EventKind, FleetConfig, Scenario


@dataclass(frozen=True, slots=True)
class Size:
    shards: int
    workers: int
    zones: int = 2


def shard_ids(n: int) -> tuple[str, ...]:
    return tuple(f"shardId-{i:012d}" for i in range(n))


def worker_ids(n: int, zones: int, prefix: str = "z") -> list[tuple[str, str]]:
    """(worker id, zone), zones interleaved so any prefix of the list is spread over the zones."""
    out = []
    for i in range(n):
        zone = f"{prefix}{i % zones + 1}"
        out.append((f"{zone}-w{i:04d}", zone))
    return out


def _starts(workers: Sequence[tuple[str, str]], at: float = 0.0, disruptive: bool = True) -> list[Event]:
    return [Event(at, EventKind.START, w, zone=z, disruptive=disruptive) for w, z in workers]


def _steady(shards: Sequence[str], workers: Sequence[tuple[str, str]]) -> dict[str, str]:
    return {s: workers[i % len(workers)][0] for i, s in enumerate(shards)}


def cold(size: Size, fleet: FleetConfig, rng: random.Random) -> Scenario:
    shards = shard_ids(size.shards)
    workers = worker_ids(size.workers, size.zones)
    return Scenario(
        "cold",
        "cold start: every worker starts on an empty lease table",
        shards,
        {},
        tuple(_starts(workers)),
        {},
        300.0,
    )


def scale_out(size: Size, fleet: FleetConfig, rng: random.Random) -> Scenario:
    """The scale-out of contract §10.4: one cluster holds every shard, then a second cluster of the same
    size joins."""
    shards = shard_ids(size.shards)
    half = max(1, size.workers // 2)
    first = [(f"c1-w{i:04d}", "c1") for i in range(half)]
    second = [(f"c2-w{i:04d}", "c2") for i in range(size.workers - half)]
    events = _starts(first, 0.0, disruptive=False) + _starts(second, 10.0)
    return Scenario(
        "scale-out",
        f"scale-out: {half} workers in c1 hold {size.shards} shards, {len(second)} more join in c2",
        shards,
        {},
        tuple(events),
        _steady(shards, first),
        600.0,
    )


def crash(size: Size, fleet: FleetConfig, rng: random.Random) -> Scenario:
    shards = shard_ids(size.shards)
    workers = worker_ids(size.workers, size.zones)
    victim = workers[-1][0]
    events = [*_starts(workers, 0.0, disruptive=False), Event(10.0, EventKind.CRASH, victim)]
    return Scenario(
        "crash", f"worker {victim} crashes", shards, {}, tuple(events), _steady(shards, workers), 300.0
    )


def leader_crash(size: Size, fleet: FleetConfig, rng: random.Random) -> Scenario:
    """The first worker by id (the leader in 3.x modes) crashes."""
    shards = shard_ids(size.shards)
    workers = worker_ids(size.workers, size.zones)
    victim = min(w for w, _ in workers)
    events = [*_starts(workers, 0.0, disruptive=False), Event(10.0, EventKind.CRASH, victim)]
    return Scenario(
        "leader-crash",
        f"the leader {victim} crashes",
        shards,
        {},
        tuple(events),
        _steady(shards, workers),
        400.0,
    )


def rolling(size: Size, fleet: FleetConfig, rng: random.Random) -> Scenario:
    """Every worker stops gracefully and comes back (same id), one after another."""
    shards = shard_ids(size.shards)
    workers = worker_ids(size.workers, size.zones)
    events = _starts(workers, 0.0, disruptive=False)
    step = fleet.restart_downtime_s + 10.0
    t = 10.0
    for w, z in workers:
        events.append(Event(t, EventKind.STOP, w))
        events.append(Event(t + fleet.restart_downtime_s, EventKind.START, w, zone=z))
        t += step
    return Scenario(
        "rolling",
        f"rolling restart of all {len(workers)} workers, {fleet.restart_downtime_s:.0f} s down each",
        shards,
        {},
        tuple(events),
        _steady(shards, workers),
        t + 200.0,
    )


def hot(size: Size, fleet: FleetConfig, rng: random.Random) -> Scenario:
    """Cold start with Zipf-distributed shard throughput (s = 1.1, the hottest at 900 KB/s)."""
    shards = shard_ids(size.shards)
    order = list(shards)
    rng.shuffle(order)
    throughput = {s: 900.0 / (rank + 1) ** 1.1 + 1.0 for rank, s in enumerate(order)}
    workers = worker_ids(size.workers, size.zones)
    return Scenario(
        "hot", "cold start with Zipf shard throughput", shards, throughput, tuple(_starts(workers)), {}, 400.0
    )


def zone_loss(size: Size, fleet: FleetConfig, rng: random.Random) -> Scenario:
    zones = max(size.zones, 2)
    shards = shard_ids(size.shards)
    workers = worker_ids(size.workers, zones)
    lost = f"z{zones}"
    events = _starts(workers, 0.0, disruptive=False) + [
        Event(10.0, EventKind.CRASH, w) for w, z in workers if z == lost
    ]
    return Scenario(
        "zone-loss", f"zone {lost} disappears", shards, {}, tuple(events), _steady(shards, workers), 300.0
    )


def reshard(size: Size, fleet: FleetConfig, rng: random.Random) -> Scenario:
    """A storm: a fifth of the shards split and as many pairs merge over one minute."""
    shards = shard_ids(size.shards)
    workers = worker_ids(size.workers, size.zones)
    order = list(shards)
    rng.shuffle(order)
    n = max(1, len(order) // 5)
    events = _starts(workers, 0.0, disruptive=False)
    for i, parent in enumerate(order[:n]):
        events.append(Event(10.0 + 60.0 * i / n, EventKind.SPLIT, shards=(parent,)))
    rest = order[n:]
    for i in range(min(n, len(rest) // 2)):
        events.append(Event(10.0 + 60.0 * i / n, EventKind.MERGE, shards=(rest[2 * i], rest[2 * i + 1])))
    return Scenario("reshard", "reshard storm", shards, {}, tuple(events), _steady(shards, workers), 400.0)


def scale(size: Size, fleet: FleetConfig, rng: random.Random) -> Scenario:
    shards = shard_ids(size.shards)
    workers = worker_ids(size.workers, size.zones)
    return Scenario("scale", "cold start at scale", shards, {}, tuple(_starts(workers)), {}, 90.0)


Builder = Callable[[Size, FleetConfig, random.Random], Scenario]

SCENARIOS: dict[str, Builder] = {
    "cold": cold,
    "scale-out": scale_out,
    "crash": crash,
    "leader-crash": leader_crash,
    "rolling": rolling,
    "hot": hot,
    "zone-loss": zone_loss,
    "reshard": reshard,
    "scale": scale,
}

#: full-scale sizes for the benchmark (``scale-out`` is contract §10.4)
FULL_SIZES: dict[str, Size] = {
    "scale-out": Size(500, 200, 2),
    "scale": Size(10_000, 1_000, 3),
}
DEFAULT_SIZE = Size(500, 200, 2)


def build(name: str, size: Size, fleet: FleetConfig, seed: int = 0) -> Scenario:
    try:
        builder = SCENARIOS[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}: choose from {', '.join(SCENARIOS)}") from None
    return builder(size, fleet, random.Random(seed))  # noqa: S311 - reproducible scenarios
