"""Lease balancing at full scale: every policy through every scenario, the decider's speed, DynamoDB cost.

Prints four tables (markdown with ``--markdown``):

1. the comparison of the 2.x taker, Java's variance-based decider and this project's assignor over
   every simulator scenario at the size of the scale-out of contract §10.4 (500 shards, 200 workers,
   2 zones), the rolling restart
   also with a restart grace, and the cold start at 10,000 shards x 1,000 workers over 3 zones;
2. the time one decider call takes to place 10,000 unowned leases over 1,000 workers (median of
   ``--runs``), Java's decider as the baseline;
3. DynamoDB units per lease-hour against fleet size, and the ratio to the 2.x taker;
4. failover at equal time: a worker crash with the default assignment interval and with a shorter one.

``--quick`` runs everything at a tenth of the size (for the smoke test).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from kcl_daemon.core.leader.assignor import CooperativeAssignor
from kcl_daemon.core.leader.decider import DeciderConfig, DeciderState, LeaseView, WorkerView
from kcl_daemon.core.leader.variance import VarianceDecider
from kcl_daemon.sim.model import FleetConfig, Result
from kcl_daemon.sim.report import compare, table
from kcl_daemon.sim.scenarios import SCENARIOS, Size

POLICIES = ("2.x", "variance", "cooperative")


def comparison(size: Size, scale: Size, grace_s: float, seed: int) -> list[Result]:
    fleet = FleetConfig()
    names = [n for n in SCENARIOS if n != "scale"]
    results = compare(names, POLICIES, size, fleet, seed)
    rolling_at = max(i for i, r in enumerate(results) if r.scenario == "rolling") + 1
    graced = compare(["rolling"], ["cooperative"], size, replace(fleet, restart_grace_s=grace_s), seed)
    results[rolling_at:rolling_at] = graced
    results += compare(["scale"], POLICIES, scale, fleet, seed)
    return results


def decider_speed(shards: int, workers: int, runs: int) -> list[tuple[str, float, int]]:
    leases = [LeaseView(f"shardId-{i:012d}", None, 0) for i in range(shards)]
    fleet = [WorkerView(f"z{i % 3}-w{i:04d}", zone=f"z{i % 3}") for i in range(workers)]
    out = []
    for decider in (VarianceDecider(), CooperativeAssignor()):
        times = []
        moves = 0
        for _ in range(runs):
            start = time.perf_counter()
            decision = decider.decide(leases, fleet, 0.0, DeciderState(), DeciderConfig())
            times.append(time.perf_counter() - start)
            moves = len(decision.moves)
        out.append((decider.name, 1000 * statistics.median(times), moves))
    return out


def ddb_by_size(sizes: list[Size], seed: int) -> list[tuple[Size, float, float, float]]:
    out = []
    for size in sizes:
        results = {r.policy: r for r in compare(["crash"], ["2.x", "cooperative"], size, FleetConfig(), seed)}
        base, ours = results["2.x"], results["cooperative"]
        out.append(
            (
                size,
                base.ddb_units_per_lease_hour,
                ours.ddb_units_per_lease_hour,
                ours.ddb_units_per_lease_hour / base.ddb_units_per_lease_hour,
            )
        )
    return out


def failover(size: Size, seed: int) -> list[tuple[str, Result]]:
    out = []
    base = compare(["crash"], ["2.x"], size, FleetConfig(), seed)[0]
    out.append(("2.x, failover 10 s", base))
    for interval in (20.0, 5.0, 2.0):
        fleet = FleetConfig(assignment_interval_s=interval)
        out.append(
            (
                f"cooperative, interval {interval:g} s",
                compare(["crash"], ["cooperative"], size, fleet, seed)[0],
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--grace-ms", type=int, default=120_000)
    parser.add_argument("--quick", action="store_true", help="a tenth of the size")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    div = 10 if args.quick else 1
    size = Size(500 // div, 200 // div, 2)
    scale = Size(10_000 // div, 1_000 // div, 3)

    started = time.perf_counter()
    results = comparison(size, scale, args.grace_ms / 1000, args.seed)
    where = f"{size.shards} shards, {size.workers} workers, 2 zones; scale: {scale.shards} x {scale.workers}"
    print(f"## Policies at the scale-out's size ({where})\n")
    print(table(results, markdown=args.markdown))

    print(
        f"\n## Placing {scale.shards} unowned leases over {scale.workers} workers (median of {args.runs})\n"
    )
    speed = decider_speed(scale.shards, scale.workers, args.runs)
    baseline = speed[0][1]
    for name, ms, moves in speed:
        print(f"{name:9} {ms:8.1f} ms  {moves} moves  ({ms / baseline:.2f}x variance)")

    print("\n## DynamoDB units per lease-hour (crash scenario), ours against the 2.x taker\n")
    sizes = [Size(50 // div or 5, 10 // div or 2), Size(100 // div, 20 // div), Size(200 // div, 50 // div)]
    sizes += [Size(500 // div, 100 // div), Size(500 // div, 200 // div)]
    print("shards  workers  2.x      ours     ratio")
    for s, base, ours, ratio in ddb_by_size(sizes, args.seed):
        print(f"{s.shards:6}  {s.workers:7}  {base:7.0f}  {ours:7.0f}  {ratio:.2f}")

    print(f"\n## Failover of a crashed worker ({size.shards} shards, {size.workers} workers)\n")
    print("policy                 balanced after s  unserved lease-s  DDB units/lease-h")
    for label, r in failover(size, args.seed):
        ttb = "never" if r.time_to_balance_s is None else f"{r.time_to_balance_s:.0f}"
        print(f"{label:22} {ttb:>16}  {r.unserved_lease_s:16.0f}  {r.ddb_units_per_lease_hour:17.0f}")
    print(f"\n(total {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
