"""LeaseCoordinator over an in-memory, counter-fenced lease table and a fake clock (no real waiting).

The integration tests run the same scenarios against moto_server and dynalite; these check the shell's
timing logic exactly, in simulated seconds.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from random import Random

import pytest

from kcl_daemon.core.lease import Lease
from kcl_daemon.core.sequence import TRIM_HORIZON
from kcl_daemon.errors import LeaseConflict
from kcl_daemon.leases.coordinator import CoordinatorConfig, LeaseCoordinator


@dataclass
class Scan:
    leases: list[Lease]
    skipped: list[str] = field(default_factory=list)


class FakeTable:
    """Conditional writes fenced on leaseCounter, like DynamoDB with the KCL conditions."""

    def __init__(self, leases: list[Lease]) -> None:
        self.items = {lease.lease_key: lease for lease in leases}

    def list_leases(self) -> Scan:
        return Scan(list(self.items.values()))

    def _check(self, lease: Lease) -> None:
        if self.items[lease.lease_key].lease_counter != lease.lease_counter:
            raise LeaseConflict(f"{lease.lease_key}: counter moved")

    def renew(self, lease: Lease) -> Lease:
        self._check(lease)
        self.items[lease.lease_key] = lease.renewed()
        return self.items[lease.lease_key]

    def take(self, lease: Lease, owner: str) -> Lease:
        self._check(lease)
        self.items[lease.lease_key] = lease.taken_by(owner)
        return self.items[lease.lease_key]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:  # the loops are not used here
        raise AssertionError("tests step the coordinators themselves")


def shards(count: int) -> list[Lease]:
    return [
        Lease(lease_key=f"shardId-{i:012d}", lease_counter=0, checkpoint=TRIM_HORIZON) for i in range(count)
    ]


class Fleet:
    """Steps every live coordinator's renewer and taker on their own periods, in simulated time."""

    def __init__(self, table: FakeTable, workers: list[str], failover_s: float = 10.0) -> None:
        self.table = table
        self.clock = FakeClock()
        self.coordinators = {
            w: LeaseCoordinator(
                table, CoordinatorConfig(worker_id=w, failover_s=failover_s), self.clock, rng=Random(i)
            )
            for i, w in enumerate(workers)
        }
        config = next(iter(self.coordinators.values())).config
        self.renew_every, self.take_every = config.renew_interval_s, config.take_interval_s
        # stagger the takers as real workers are
        self.next_renew = dict.fromkeys(workers, self.clock.now)
        self.next_take = {w: self.clock.now + i * 3.0 for i, w in enumerate(workers)}
        self.stopped: set[str] = set()

    def owners(self) -> Counter[str]:
        return Counter(lease.lease_owner for lease in self.table.items.values() if lease.lease_owner)

    async def run_until(self, done, limit_s: float, step_s: float = 0.1) -> float:  # type: ignore[no-untyped-def]
        start = self.clock.now
        while self.clock.now - start <= limit_s:
            for worker, coordinator in self.coordinators.items():
                if worker in self.stopped:
                    continue
                if self.clock.now >= self.next_renew[worker]:
                    await coordinator.renew_once()
                    self.next_renew[worker] += self.renew_every
                if self.clock.now >= self.next_take[worker]:
                    await coordinator.take_once()
                    self.next_take[worker] = self.clock.now + self.take_every
            if done():
                return self.clock.now - start
            self.clock.now += step_s
        raise AssertionError(f"not done within {limit_s}s simulated; owners {self.owners()}")


async def test_three_workers_converge_and_two_take_over_when_one_stops() -> None:
    fleet = Fleet(FakeTable(shards(12)), ["w-a", "w-b", "w-c"])
    await fleet.run_until(lambda: sorted(fleet.owners().values()) == [4, 4, 4], limit_s=600)

    fleet.stopped.add("w-c")  # stops renewing and taking, as if killed
    took = await fleet.run_until(lambda: sorted(fleet.owners().values()) == [6, 6], limit_s=120)
    bound = 10.0 + 2 * fleet.take_every
    assert took <= bound, f"takeover took {took:.1f}s simulated, bound {bound:.1f}s"
    # the old owner's view: its leases are lost by its own clock once it cannot renew
    held = {w: set(c.held) for w, c in fleet.coordinators.items() if w not in fleet.stopped}
    assert sum(len(h) for h in held.values()) == 12 and not held["w-a"] & held["w-b"]


async def test_a_lease_whose_counter_moved_is_lost_on_the_next_renewal() -> None:
    table = FakeTable(shards(1))
    clock = FakeClock()
    lost: list[str] = []
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), clock, rng=Random(1))
    coordinator.listeners.lost.append(lost.append)
    await coordinator.take_once()
    assert set(coordinator.held) == {"shardId-000000000000"}
    stolen = table.items["shardId-000000000000"].taken_by("thief")
    table.items[stolen.lease_key] = stolen
    await coordinator.renew_once()
    assert lost == ["shardId-000000000000"] and not coordinator.held


@pytest.mark.parametrize("silence_s", [10.5, 30.0])
async def test_a_lease_not_renewed_for_the_failover_time_is_lost_locally(silence_s: float) -> None:
    table = FakeTable(shards(2))
    clock = FakeClock()
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), clock, rng=Random(1))
    await coordinator.take_once()
    clock.now += silence_s  # e.g. the renew pool was starved; DynamoDB may already show a new owner
    await coordinator.renew_once()
    assert not coordinator.held
