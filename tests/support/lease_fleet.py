"""Step a fleet of LeaseCoordinators through simulated time (shared by component and integration tests).

Each live coordinator renews every failover/3 - epsilon and follows the daemon's taker schedule on the
fake clock: a full run every 2 x (failover + epsilon), staggered 3 s apart as real workers' are, and
expiry passes (no steals) in between (renewing per worker, at the heartbeat reads' period, most of
them reading the heartbeats alone) and when a lease seen would expire. The table may be an
in-memory fake or the real DynamoDB adapter against an emulator: only the clock is simulated.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from random import Random

from kcl_daemon.core.leases.taker import next_taker_pass
from kcl_daemon.leases.coordinator import CoordinatorConfig, LeaseCoordinator, LeaseTableOps
from tests.support.clocks import SteppedClock


class CoordinatorFleet:
    def __init__(
        self,
        table: LeaseTableOps,
        workers: list[str],
        failover_s: float = 10.0,
        *,
        max_leases_to_steal_at_one_time: int = 1,
        lease_renewal: str = "PER_LEASE",
    ) -> None:
        self.table = table
        self.lease_renewal = lease_renewal
        self.clock = SteppedClock()
        self.failover_s, self.max_steal = failover_s, max_leases_to_steal_at_one_time
        self.coordinators = {w: self._coordinator(w, i) for i, w in enumerate(workers)}
        config = next(iter(self.coordinators.values())).config
        self.renew_every, self.take_every = config.renew_interval_s, config.take_interval_s
        self.expiry_every = config.expiry_pass_s
        self.next_renew = dict.fromkeys(workers, self.clock.now)
        # the taker's schedule (next_taker_pass): full runs staggered by 3 s, expiry passes in between
        self.next_full = {w: self.clock.now + i * 3.0 for i, w in enumerate(workers)}
        self.next_take = dict(self.next_full)
        self.stopped: set[str] = set()

    def _coordinator(self, worker: str, seed: int, lease_renewal: str | None = None) -> LeaseCoordinator:
        config = CoordinatorConfig(
            worker_id=worker,
            failover_s=self.failover_s,
            max_leases_to_steal_at_one_time=self.max_steal,
            lease_renewal=lease_renewal or self.lease_renewal,
        )
        return LeaseCoordinator(self.table, config, self.clock, rng=Random(seed))

    def add(self, worker: str, *, lease_renewal: str | None = None) -> None:
        """A worker that starts now (a replacement): its first pass is a full run, at once."""
        self.coordinators[worker] = self._coordinator(worker, len(self.coordinators), lease_renewal)
        self.next_renew[worker] = self.next_full[worker] = self.next_take[worker] = self.clock.now

    def owners(self) -> Counter[str]:
        """Leases per owner as the table says (not as the coordinators believe)."""
        return Counter(lease.lease_owner for lease in self.table.list_leases().leases if lease.lease_owner)

    def held(self) -> dict[str, set[str]]:
        """Leases per live worker as the coordinators believe."""
        return {w: set(c.held) for w, c in self.coordinators.items() if w not in self.stopped}

    async def run_until(self, done: Callable[[], bool], limit_s: float, step_s: float = 0.1) -> float:
        """Advance until ``done()``; returns the simulated seconds it took."""
        start = self.clock.now
        while self.clock.now - start <= limit_s:
            acted = False
            for worker, coordinator in self.coordinators.items():
                if worker in self.stopped:
                    continue
                renewal = coordinator.renewal
                if renewal is not None:  # per-worker renewal: the heartbeat, and the keeper's own pass
                    coordinator._loop = asyncio.get_running_loop()
                    renewal.tick()
                    coordinator.keeper.tick()
                    await asyncio.sleep(0)  # the keeper's events reach the coordinator
                if self.clock.now >= self.next_renew[worker] and (renewal is None or not renewal.per_worker):
                    await coordinator.renew_once()
                    self.next_renew[worker] += self.renew_every
                    acted = True
                if self.clock.now >= self.next_take[worker]:
                    now = self.clock.now
                    await coordinator.take_once(steals=now >= self.next_full[worker])
                    step = next_taker_pass(
                        now,
                        full_due_at=self.next_full[worker],
                        take_interval_s=self.take_every,
                        expiry_interval_s=coordinator.pass_every_s(),
                        earliest_due=coordinator.next_expiry(),
                    )
                    self.next_full[worker], self.next_take[worker] = step.full_due_at, step.wake_at
                    acted = True
            if acted and done():
                return self.clock.now - start
            self.clock.now += step_s
        raise AssertionError(f"not done within {limit_s}s simulated; owners {self.owners()}")
