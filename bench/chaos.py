"""Chaos benchmark: kcl-daemon processes under reshards, SIGKILLs and DynamoDB fault windows.

Starts kinesalite and dynalite on 127.0.0.1 (from ``.cache/node``, as ``scripts/bootstrap.sh`` installs
them), then for each ``--seed`` x ``--mode`` (``leader``: KCL 3.x leader-based assignment; ``taker``: the
2.x-compatible taker) x ``--host`` (``idle``; ``hog``: a busy loop on every core at the daemons'
priority) runs ``tests/support/chaos/harness.py``: several daemons with the recording processor, records
produced at a steady rate, a split and a merge, SIGKILLs (each victim restarted 2 s later), DynamoDB
fault windows through the fault-injecting proxy, then a drain of ``--drain-s``. Prints, per run, the
records produced, undelivered at the end of the drain and duplicated (with the reason of every
duplicate), the leases a worker gave up while the table still named it, tracebacks, the takeover and
resumption times after each SIGKILL and the faults injected; then one table of every run. The goal:
0 undelivered, duplicates only from crashes and steals, 0 leases dropped while named, 0 tracebacks,
resumption within failover + 3 s (a killed leader: plus the leader lock's duration).

    .venv/bin/python bench/chaos.py --seed 1 --seed 2 --seed 3 --mode leader --mode taker \
        --host idle --host hog [--renewal PER_LEASE --renewal PER_WORKER]

``--renewal PER_WORKER`` runs the daemons with ``leaseRenewal = PER_WORKER``, in either lease mode.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from tests.support.chaos.harness import ChaosConfig, ChaosReport, run_chaos
from tests.support.emulators import EmulatorUnavailable, running_emulators


def _p50_max(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} / {max(values):.1f}" if values else "n/a"


def _worker_kills(report: ChaosReport) -> list[float]:
    """Resumption times of the shards of victims that were not leader, nor killed within a failover of
    the leader."""
    rest = list(report.resumed_s)
    for t in report.resumed_leader_s:
        rest.remove(t)
    return rest


def table(reports: list[ChaosReport], failover_s: float) -> str:
    """One Markdown row per run."""
    rows = [
        "| seed | mode | host | produced | undelivered after drain | duplicated | not from crash/steal "
        "| dropped while named | tracebacks | resumption p50 / max (s): worker killed | leader killed* "
        "| wall (s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in reports:
        dup = sum(r.duplicates.values())
        rows.append(
            f"| {r.seed} | {r.mode} | {'hog' if r.hog else 'idle'} | {r.produced} | {len(r.lost)} | "
            f"{dup} ({100 * dup / max(r.produced, 1):.1f} %) | {r.bad_duplicates} | "
            f"{r.dropped_while_named} | {r.tracebacks} | {_p50_max(_worker_kills(r))} | "
            f"{_p50_max(r.resumed_leader_s)} | {r.wall_s:.0f} |"
        )
    for mode in sorted({r.mode for r in reports}):
        workers = [t for r in reports if r.mode == mode for t in _worker_kills(r)]
        leaders = [t for r in reports if r.mode == mode for t in r.resumed_leader_s]
        rows.append(
            f"\n{mode} mode, over every run: a killed worker's shards resumed p50 / max "
            f"{_p50_max(workers)} s (target failover + 3 = {failover_s + 3:.0f} s); a killed leader's "
            f"{_p50_max(leaders)} s (target failover + 3 + the lock's remaining duration, at most "
            f"{2 * failover_s + 3:.0f} s with kcl-daemon's lock of one failover)"
        )
    rows.append(
        "\n*leader killed: the shards of a killed leader, and of a worker killed within one failover of it "
        "(no leader can move a lease until a new one holds the lock)"
    )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, action="append", help="repeat for several runs (default 1)")
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--rate", type=float, default=500.0, help="records per second")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--daemons", type=int, default=3)
    parser.add_argument("--kills", type=int, default=2)
    parser.add_argument("--fault-windows", type=int, default=2)
    parser.add_argument("--fault-window-s", type=float, default=12.0)
    parser.add_argument("--failover-s", type=float, default=3.0)
    parser.add_argument("--mode", choices=["leader", "taker"], action="append", help="default: both")
    parser.add_argument("--host", choices=["idle", "hog"], action="append", help="default: idle")
    parser.add_argument(
        "--renewal",
        choices=["PER_LEASE", "PER_WORKER"],
        action="append",
        help="leaseRenewal of the daemons (either lease mode); default PER_LEASE",
    )
    parser.add_argument("--drain-s", type=float, default=60.0, help="time allowed to deliver the rest")
    parser.add_argument("--keep", action="store_true", help="keep the daemons' logs and records")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kcl-chaos-"))
    failures = 0
    reports: list[ChaosReport] = []
    try:
        # kinesalite and dynalite with the preload that survives a SIGKILLed daemon's aborted requests
        with running_emulators(work) as backend:
            runs = [
                (seed, mode, host, renewal)
                for seed in args.seed or [1]
                for mode in args.mode or ["leader", "taker"]
                for host in args.host or ["idle"]
                for renewal in args.renewal or ["PER_LEASE"]
            ]
            for seed, mode, host, renewal in runs:
                config = ChaosConfig(
                    seed=seed,
                    shards=args.shards,
                    records=args.records,
                    rate_per_s=args.rate,
                    daemons=args.daemons,
                    failover_s=args.failover_s,
                    kills=args.kills,
                    fault_windows=args.fault_windows,
                    fault_window_s=args.fault_window_s,
                    settle_limit_s=args.drain_s,
                    lease_mode=mode,
                    cpu_hog=host == "hog",
                    lease_renewal=renewal,
                )
                run_dir = work / f"seed-{seed}-{mode}-{host}-{renewal}"
                run_dir.mkdir()
                report = run_chaos(
                    config,
                    backend.kinesis_endpoint,
                    backend.dynamodb_endpoint,
                    run_dir,
                    say=lambda line: print(f"  {line}"),
                )
                print("\n".join(report.lines()), flush=True)
                reports.append(report)
                failures += (
                    bool(report.lost)
                    or report.bad_duplicates > 0
                    or report.dropped_while_named > 0
                    or report.tracebacks > 0
                )
    except EmulatorUnavailable as exc:
        shutil.rmtree(work, ignore_errors=True)
        print(f"the emulators are needed: {exc}", file=sys.stderr)
        return 2
    print(table(reports, args.failover_s))
    if args.keep:
        print(f"logs and records kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
