"""The lease mode follows the fleet's Migration3.0 item: one algorithm at a time, switched in place."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from kcl_daemon.core.leader.client_version import (
    Algorithm,
    ClientVersion,
    ClientVersionConfig,
    fleet_ready_for_3x,
)
from kcl_daemon.errors import Throttled, TransientNetwork
from kcl_daemon.leader.mode import LeaderMode, LeaderModeConfig, make_decider
from kcl_daemon.metrics.observer import NULL_WORKER_OBSERVER
from tests.support.clocks import FakeClock
from tests.support.fake_tables import FakeCoordinatorStore, fake_tables


class _Scheduler:
    def __init__(self) -> None:
        self.loops: dict[str, asyncio.Task[None]] = {}
        self.coordinator = self
        self.observer = NULL_WORKER_OBSERVER

    async def run_taker(self) -> None:
        await asyncio.Event().wait()

    def bytes_delivered(self, key: str) -> int | None:
        return None

    def stop_shard(self, key: str) -> None:
        return None

    def adopt_written(self, lease: object, sent_at: float) -> bool:
        return False

    def add_loop(self, name: str, factory: Callable[[], Coroutine[Any, Any, None]]) -> asyncio.Task[None]:
        async def idle() -> None:
            await asyncio.Event().wait()

        task = asyncio.create_task(idle(), name=name)
        self.loops[name] = task
        return task

    def running(self) -> set[str]:
        return {name for name, task in self.loops.items() if not task.done()}


class _Table:
    throughput_source: object = None


async def test_switches_algorithm_when_the_fleet_flips_and_never_runs_both() -> None:
    tables = fake_tables("w1")
    store = tables.legacy
    store.items["Migration3.0"] = {"cv": ClientVersion.UPGRADE_FROM_2X.value, "mb": "java", "mts": 1, "h": []}
    table = _Table()
    mode = LeaderMode(
        LeaderModeConfig("w1", ClientVersionConfig.V3X, strategy="LEASE_COUNT_BASED"),
        table,
        tables,
        FakeClock(),
    )
    scheduler: Any = _Scheduler()
    await mode.start(scheduler)
    assert mode.algorithm is Algorithm.TAKER  # as stored, whatever this worker is configured with
    assert {"lease-taker", "worker-metrics", "client-version"} <= scheduler.running()
    assert table.throughput_source is not None
    store.items["Migration3.0"]["cv"] = ClientVersion.V3X_WITH_ROLLBACK.value
    await mode._switch(ClientVersion.V3X_WITH_ROLLBACK)
    await asyncio.sleep(0)
    running = scheduler.running()
    assert "lease-taker" not in running
    assert {"leader-election", "lease-assignment", "lease-discovery", "lease-handoff"} <= running
    for task in scheduler.loops.values():
        task.cancel()


@pytest.mark.parametrize(
    ("gsi", "owners", "metrics", "ready"),
    [
        (True, ["a", "b"], {"a": 95.0, "b": 50.0}, True),
        (False, ["a"], {"a": 95.0}, False),  # the GSI is still being built
        (True, ["a", "b"], {"a": 95.0}, False),  # b is a KCL 2.x worker: no metrics
        (True, ["a"], {"a": 30.0}, False),  # a's metrics are stale (older than 2 x 30 s)
        (True, ["a", None], {"a": 95.0}, False),  # Java's quirk: an unowned lease blocks the flip
    ],
)
def test_readiness_for_3x(
    gsi: bool, owners: list[str | None], metrics: dict[str, float], ready: bool
) -> None:
    assert fleet_ready_for_3x(gsi, owners, metrics, 100.0, 30.0)[0] is ready


def test_strategies() -> None:
    assert make_decider("LEASE_COUNT_BASED").name == "LEASE_COUNT_BASED"
    assert make_decider("VARIANCE").name == "variance"
    with pytest.raises(ValueError, match="BEST"):
        make_decider("BEST")


class _FlakyStore(FakeCoordinatorStore):
    """Throttles the first reads and loses the reply of the first (applied) write."""

    def __init__(self, failing_reads: int, lose_first_write: bool) -> None:
        super().__init__("app-CoordinatorState")
        self.failing_reads = failing_reads
        self.lose_first_write = lose_first_write
        self.puts = 0

    def get(self, key: str) -> dict[str, Any] | None:
        if self.failing_reads and key == "Migration3.0":
            self.failing_reads -= 1
            raise Throttled("get Migration3.0: ProvisionedThroughputExceededException")
        return super().get(key)

    def put(self, key: str, attributes: Any, **kwargs: Any) -> None:
        self.puts += 1
        super().put(key, attributes, **kwargs)
        if self.lose_first_write:
            self.lose_first_write = False
            raise TransientNetwork("put Migration3.0: Read timeout on endpoint URL")


@pytest.mark.parametrize("lose_first_write", [False, True])
async def test_start_up_waits_out_throttles_and_settles_an_unknown_write_by_reading(
    lose_first_write: bool,
) -> None:
    tables = fake_tables("w1")
    store = _FlakyStore(failing_reads=4, lose_first_write=lose_first_write)
    tables.legacy = store
    clock = FakeClock()
    mode = LeaderMode(LeaderModeConfig("w1"), _Table(), tables, clock)
    await mode.start_tables()
    version = await mode.resolve_version()
    assert version is ClientVersion.V3X and store.items["Migration3.0"]["cv"] == ClientVersion.V3X.value
    assert store.puts == 1, "an applied write whose reply was lost is not written again"
    assert clock.sleeps, "the throttled reads were retried after a backoff"
