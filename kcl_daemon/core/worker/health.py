"""Liveness and readiness of one worker, judged from plain facts: what ``/healthz`` and ``/readyz`` say.

Pure: the worker's shell (:mod:`kcl_daemon.worker.health`) gathers the facts, these functions judge
them. Each verdict is a list of named checks, every one with a reason a person can act on.

**Liveness** (``/healthz``; red means "restart me"):

* the event loop runs callbacks: the watchdog thread's last callback has not waited longer than
  ``event_loop_limit_s``;
* every supervised loop is running, and none has been busy (awake, not sleeping between two rounds)
  for longer than its budget;
* the renewer keeps up: no lease is still held past the time the lease keeper gives it up, plus a
  grace. Past its local expiry (contract §4.3) the keeper holds a lease's records back and keeps writing
  for up to one more failover time, then gives the lease up even when every write fails, so a lease held
  past that means the keeper itself is stuck.

**Readiness** (``/readyz``; red means "not doing its job right now", never a reason to restart):

* started and not stopping;
* the lease table answers: no failure streak longer than ``table_grace_s``;
* holding or able to take leases: holds at least one, or (KCL 3.x mode) its worker-metrics item is
  current, without which a leader assigns it nothing;
* no shard stalled: behind the tip (records waiting, or ``millisBehindLatest`` > 0) while its child
  has finished no ``processRecords`` for ``shardStallMillis``; a parked shard counts as stalled.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class HealthReport:
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def failing(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if not check.ok)

    def as_json(self) -> dict[str, object]:
        return {
            "status": "ok" if self.ok else "fail",
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
        }


# -- liveness ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoopFacts:
    """One supervised loop: whether its task runs, and for how long it has been awake (None: asleep)."""

    name: str
    running: bool
    busy_for_s: float | None
    budget_s: float


@dataclass(frozen=True, slots=True)
class LivenessFacts:
    #: how long the watchdog's last callback has waited for the event loop (0: it ran)
    event_loop_lag_s: float
    event_loop_limit_s: float
    loops: tuple[LoopFacts, ...]
    #: (lease key, seconds past the keeper's give-up time) of the leases still held after it
    overdue_leases: tuple[tuple[str, float], ...] = ()
    #: how far past that time a held lease may be before the renewer counts as stuck
    renew_grace_s: float = 1.0
    #: False before the worker started its loops (nothing to judge yet but the event loop)
    started: bool = True


def liveness(facts: LivenessFacts) -> HealthReport:
    checks = [
        Check(
            "event-loop",
            facts.event_loop_lag_s <= facts.event_loop_limit_s,
            f"a callback has waited {facts.event_loop_lag_s:.1f}s for the event loop (limit "
            f"{facts.event_loop_limit_s:.1f}s): something blocks it"
            if facts.event_loop_lag_s > facts.event_loop_limit_s
            else f"runs callbacks (lag {facts.event_loop_lag_s:.2f}s)",
        )
    ]
    for loop in facts.loops:
        checks.append(_loop_check(loop))
    overdue = [(key, late) for key, late in facts.overdue_leases if late > facts.renew_grace_s]
    if overdue:
        listed = ", ".join(f"{key} ({late:.1f}s)" for key, late in sorted(overdue)[:5])
        more = f" and {len(overdue) - 5} more" if len(overdue) > 5 else ""
        checks.append(
            Check(
                "renewer",
                False,
                f"{len(overdue)} lease(s) still held past the time the lease keeper gives them up: "
                f"{listed}{more}; a working keeper gives them up by then, so it is stuck",
            )
        )
    elif facts.started:
        checks.append(Check("renewer", True, "every held lease renewed or given up in time"))
    return HealthReport(tuple(checks))


def _loop_check(loop: LoopFacts) -> Check:
    name = f"loop {loop.name}"
    if not loop.running:
        return Check(name, False, "its task has ended (the supervisor gave up on it)")
    if loop.busy_for_s is None:
        return Check(name, True, "waiting for its next round")
    if loop.busy_for_s > loop.budget_s:
        return Check(
            name,
            False,
            f"busy for {loop.busy_for_s:.1f}s without finishing a round "
            f"(budget {loop.budget_s:.0f}s): wedged",
        )
    return Check(name, True, f"working on a round ({loop.busy_for_s:.1f}s)")


# -- readiness -----------------------------------------------------------------------------------


class Phase(enum.StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"


@dataclass(frozen=True, slots=True)
class ShardFacts:
    lease_key: str
    #: records waiting for the child (a batch in flight or fetched), or millisBehindLatest > 0
    behind: bool
    #: seconds since its child last finished a processRecords (or since the shard started)
    idle_for_s: float
    parked: str | None = None  # why it was parked, when it is


@dataclass(frozen=True, slots=True)
class ReadinessFacts:
    phase: Phase
    table: str
    #: seconds the lease table has been failing for (None: the last call succeeded)
    table_failing_for_s: float | None = None
    table_error: str | None = None
    table_grace_s: float = 3.0
    held: int = 0
    #: KCL 3.x leader-based assignment: the leader assigns only workers whose metrics are current
    leader_mode: bool = False
    #: seconds since this worker's worker-metrics item was last written (None: never)
    metrics_age_s: float | None = None
    metrics_limit_s: float = 60.0
    shards: tuple[ShardFacts, ...] = ()
    #: shardStallMillis in seconds; 0 turns the stall check off
    stall_limit_s: float = 300.0


def readiness(facts: ReadinessFacts) -> HealthReport:
    checks = [_phase_check(facts.phase)]
    if facts.phase is not Phase.RUNNING:
        return HealthReport(tuple(checks))
    checks.append(_table_check(facts))
    checks.append(_lease_check(facts))
    checks.append(_shard_check(facts.shards, facts.stall_limit_s))
    return HealthReport(tuple(checks))


def _phase_check(phase: Phase) -> Check:
    if phase is Phase.STARTING:
        return Check("started", False, "still starting (lease table, first shard sync, loops)")
    if phase is Phase.STOPPING:
        return Check("started", False, "stopping: finishing its shards and releasing its leases")
    return Check("started", True, "running")


def _table_check(facts: ReadinessFacts) -> Check:
    failing = facts.table_failing_for_s
    if failing is not None and failing >= facts.table_grace_s:
        return Check(
            "lease-table",
            False,
            f"{facts.table} has failed every call for {failing:.1f}s: {facts.table_error or 'unknown error'}",
        )
    if failing is not None:
        return Check(
            "lease-table", True, f"{facts.table} answers (one call just failed: {facts.table_error})"
        )
    return Check("lease-table", True, f"{facts.table} answers")


def _lease_check(facts: ReadinessFacts) -> Check:
    if facts.held:
        return Check("leases", True, f"holds {facts.held} lease(s)")
    if not facts.leader_mode:
        return Check("leases", True, "holds none yet; the lease taker may take some at its next run")
    age = facts.metrics_age_s
    if age is None or age > facts.metrics_limit_s:
        seen = "never written" if age is None else f"last written {age:.0f}s ago"
        return Check(
            "leases",
            False,
            f"holds none, and its worker-metrics item is {seen} (limit {facts.metrics_limit_s:.0f}s): "
            "the leader assigns it nothing",
        )
    return Check(
        "leases", True, "holds none yet; its worker metrics are current, so the leader may assign some"
    )


def _shard_check(shards: Sequence[ShardFacts], stall_limit_s: float) -> Check:
    stalled = [
        shard
        for shard in shards
        if shard.parked is not None
        or (stall_limit_s > 0 and shard.behind and shard.idle_for_s >= stall_limit_s)
    ]
    if not stalled:
        if stall_limit_s <= 0:
            return Check("shards", True, f"{len(shards)} shard(s); stall check off (shardStallMillis = 0)")
        return Check("shards", True, f"{len(shards)} shard(s), none stalled")
    parts = []
    for shard in sorted(stalled, key=lambda s: s.lease_key)[:5]:
        if shard.parked is not None:
            parts.append(f"{shard.lease_key} parked ({shard.parked})")
        else:
            parts.append(f"{shard.lease_key} behind, nothing processed for {shard.idle_for_s:.0f}s")
    more = f" and {len(stalled) - 5} more" if len(stalled) > 5 else ""
    return Check("shards", False, f"{len(stalled)} shard(s) stalled: {'; '.join(parts)}{more}")
