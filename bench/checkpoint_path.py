"""What one checkpoint costs the daemon: the whole path a child's checkpoint takes, against dynalite.

The lease coordinator holds ``--leases`` leases of a fresh lease table (the daemon's own clients, the
lease keeper's twin table with its short timeouts, its two pools as the scheduler builds them) and
``--leases`` asyncio tasks each checkpoint their lease one checkpoint after the other, as amazon_kclpy
children that checkpoint every batch do: each waits for its checkpoint to be written and acknowledged
before the next. Printed: checkpoints per second, and the CPU this process spent per checkpoint (every
thread: the event loop's side, the keeper's steps, the pool hand-offs, the UpdateItem on the lean path,
the answer's way back), median of ``--rounds`` rounds. dynalite is another process: its CPU is not
counted, but its pace bounds the rate. Compare checkouts with ``PYTHONPATH``.

    PYTHONPATH=. .venv/bin/python bench/checkpoint_path.py [--leases 256] [--checkpoints 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.blocking import BlockingPool
from kcl_daemon.clock import SystemClock
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.timings import attempt_timeout_for
from kcl_daemon.core.sequence import TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.leases.coordinator import CoordinatorConfig, LeaseCoordinator
from tests.support.emulators import Emulator, use_dummy_credentials

FAILOVER_S = 10.0


async def one_round(
    table: DynamoLeaseTable, keeper_table: DynamoLeaseTable, leases: int, total: int
) -> tuple[float, float]:
    """(checkpoints per second, CPU microseconds per checkpoint) of one round."""
    kwargs: dict[str, BlockingPool] = {}
    if "checkpoint_pool" in inspect.signature(LeaseCoordinator).parameters:  # a checkout with one
        kwargs["checkpoint_pool"] = BlockingPool(20, thread_name_prefix="lease-checkpoint")
    coordinator = LeaseCoordinator(
        table,
        CoordinatorConfig(worker_id="bench", failover_s=FAILOVER_S, max_leases_for_worker=leases),
        SystemClock(),
        renew_pool=BlockingPool(20, thread_name_prefix="lease-renew"),
        keeper_table=keeper_table,
        **kwargs,  # type: ignore[arg-type]
    )
    while len(coordinator.held) < leases:
        await coordinator.take_once()
    renewer = asyncio.create_task(coordinator.run_renewer())
    keys = sorted(coordinator.held)
    per_lease = total // leases

    async def checkpoints(key: str) -> None:
        for n in range(per_lease):
            await coordinator.checkpoint(key, ExtendedSequenceNumber(str(1_000_000 + n)))

    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(checkpoints(key) for key in keys))
    cpu1, wall1 = time.process_time(), time.perf_counter()
    renewer.cancel()
    await asyncio.gather(renewer, return_exceptions=True)
    for key in keys:
        await coordinator.release(key)
    done = per_lease * len(keys)
    return done / (wall1 - wall0), (cpu1 - cpu0) / done * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leases", type=int, default=256)
    parser.add_argument("--checkpoints", type=int, default=20000, help="per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    use_dummy_credentials()
    with tempfile.TemporaryDirectory(prefix="checkpoint-path-") as work:
        dynalite = Emulator.dynalite(Path(work))
        dynalite.start()
        try:
            from tests.support.emulators import Backend

            backend = Backend("dynalite", dynalite.endpoint, dynalite.endpoint)
            timeout = attempt_timeout_for(FAILOVER_S)
            clients = backend.clients(max_pool_connections=120, lease_keeper_timeout_s=timeout)
            assert clients.lease_keeper is not None
            rates, costs = [], []
            for _ in range(args.rounds):
                table = DynamoLeaseTable(clients.dynamodb, f"bench-{uuid.uuid4().hex[:8]}")
                table.create_table_if_missing(poll_s=0.05)
                for i in range(args.leases):
                    table.create_lease(Lease(f"shardId-{i:012d}", TRIM_HORIZON))
                keeper_table = DynamoLeaseTable(clients.lease_keeper, table.table_name)
                rate, cost = asyncio.run(one_round(table, keeper_table, args.leases, args.checkpoints))
                rates.append(rate)
                costs.append(cost)
                print(f"  {rate:8,.0f} checkpoints/s  {cost:6.0f} us CPU per checkpoint", flush=True)
        finally:
            dynalite.stop()
    print(
        f"{args.leases} leases: {statistics.median(rates):,.0f} checkpoints/s, "
        f"{statistics.median(costs):.0f} us of CPU per checkpoint (median of {args.rounds})"
    )


if __name__ == "__main__":
    main()
