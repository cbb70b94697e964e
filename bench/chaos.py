"""Chaos benchmark: kcl-daemon processes under reshards, SIGKILLs and DynamoDB fault windows.

Starts kinesalite and dynalite on 127.0.0.1 (from ``.cache/node``, as ``scripts/bootstrap.sh`` installs
them), then for each ``--seed`` runs ``tests/support/chaos/harness.py``: several daemons with the
recording processor, records produced at a steady rate, a split and a merge, SIGKILLs (each victim
restarted 2 s later), DynamoDB fault windows through the fault-injecting proxy. Prints, per seed, the
records produced, lost and duplicated (with the reason of every duplicate), the takeover times after each
SIGKILL and the faults injected. The goal: 0 lost, and duplicates only from crashes and steals.

    .venv/bin/python bench/chaos.py --seed 1 --seed 2 --seed 3
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from tests.support.chaos.harness import ChaosConfig, run_chaos
from tests.support.emulators import EmulatorUnavailable, running_emulators


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
    parser.add_argument("--keep", action="store_true", help="keep the daemons' logs and records")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kcl-chaos-"))
    failures = 0
    try:
        # kinesalite and dynalite with the preload that survives a SIGKILLed daemon's aborted requests
        with running_emulators(work) as backend:
            for seed in args.seed or [1]:
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
                    settle_limit_s=120.0,
                )
                run_dir = work / f"seed-{seed}"
                run_dir.mkdir()
                report = run_chaos(
                    config,
                    backend.kinesis_endpoint,
                    backend.dynamodb_endpoint,
                    run_dir,
                    say=lambda line: print(f"  {line}"),
                )
                print("\n".join(report.lines()), flush=True)
                failures += bool(report.lost) or report.bad_duplicates > 0
    except EmulatorUnavailable as exc:
        shutil.rmtree(work, ignore_errors=True)
        print(f"the emulators are needed: {exc}", file=sys.stderr)
        return 2
    if args.keep:
        print(f"logs and records kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
