"""Leader election rules over the ``Leader`` lock item, in AmazonDynamoDBLockClient's format (contract §3.6).

Java KCL 3.x elects its leader with the DynamoDB lock client; kcl-daemon speaks the same item so a
mixed fleet has exactly one leader:

* ``ownerName`` (worker id), ``leaseDuration`` (milliseconds **as a string**), ``recordVersionNumber``
  (a fresh UUID on every heartbeat), ``isReleased`` = ``"1"`` only when released without deleting;
* a missing lock is taken with ``attribute_not_exists``; a released one with ``isReleased = "1"``;
* expiry is *observational*: a lock may be stolen only after this process has seen the **same**
  ``recordVersionNumber`` for longer than the item's own ``leaseDuration`` (no clocks are compared across
  hosts), and the steal is conditional on that ``recordVersionNumber``. Such a lock is *always* taken
  over, whoever wrote it (our own worker id from an earlier run included) and whatever else is wrong
  with it (contract §9.4: Java fleets have stalled for good on a dead leader's lock);
* the holder heartbeats (new ``recordVersionNumber``) conditionally on the one it wrote and its name.

A holder whose heartbeats fail stops considering itself leader once the lock could be stolen by others:
its last *successful* heartbeat was *sent* more than ``leaseDuration`` minus a margin ago. Pure: the shell
(:mod:`kcl_daemon.leader.election`) reads, calls :func:`plan`, and performs the action.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

LEADER_KEY: Final = "Leader"
OWNER_NAME: Final = "ownerName"
LEASE_DURATION: Final = "leaseDuration"
RECORD_VERSION: Final = "recordVersionNumber"
IS_RELEASED: Final = "isReleased"
LEADER_ENTITY_TYPE: Final = "LEADER"
#: Java's lock duration and heartbeat (the fallback when an item carries no readable duration).
JAVA_LEASE_DURATION_S: Final = 120.0
JAVA_HEARTBEAT_S: Final = 30.0


@dataclass(frozen=True, slots=True)
class LockItem:
    owner: str | None
    #: None when the item has none (a malformed lock: taken over conditionally on its absence)
    record_version: str | None
    duration_s: float
    released: bool = False
    #: what is wrong with the item, if anything (it is still judged, with Java's 120 s when needed)
    problem: str | None = None


def parse_lock(item: Mapping[str, object] | None) -> LockItem | None:
    """The lock from its plain item; None when absent.

    A malformed item is still a lock, so it can never stall the fleet: a missing owner or record
    version is kept as None and an unreadable ``leaseDuration`` falls back to Java's 120 s, with the
    problem named in :attr:`LockItem.problem`. Like any other lock it is taken over once it has not
    changed for that duration (contract §9.4)."""
    if item is None:
        return None
    problems = []
    owner = item.get(OWNER_NAME)
    if not isinstance(owner, str) or not owner:
        problems.append(f"{OWNER_NAME} is missing or not a string ({owner!r})")
        owner = None
    rvn = item.get(RECORD_VERSION)
    if not isinstance(rvn, str) or not rvn:
        problems.append(f"{RECORD_VERSION} is missing or not a string ({rvn!r})")
        rvn = None
    raw = item.get(LEASE_DURATION)
    try:
        duration_s = float(str(raw)) / 1000.0
    except ValueError:
        duration_s = 0.0
    if not duration_s > 0 or duration_s != duration_s:  # not a positive number (NaN included)
        problems.append(f"{LEASE_DURATION} is not a positive number of ms ({raw!r}); Java's 120 s assumed")
        duration_s = JAVA_LEASE_DURATION_S
    problem = f"Leader item: {'; '.join(problems)}" if problems else None
    return LockItem(owner, rvn, duration_s, str(item.get(IS_RELEASED, "")) == "1", problem)


def lock_attributes(owner: str, record_version: str, duration_s: float) -> dict[str, str]:
    """The lock item's attributes as the lock client writes them (durations as strings of ms)."""
    return {
        OWNER_NAME: owner,
        LEASE_DURATION: str(round(duration_s * 1000)),
        RECORD_VERSION: record_version,
    }


#: what an observation records for a lock item without a record version (never a UUID)
NO_VERSION: Final = "<no recordVersionNumber>"


@dataclass(frozen=True, slots=True)
class Observation:
    """The record version this process last saw on the lock (None: no lock), and since when
    (monotonic seconds)."""

    record_version: str | None
    since: float


def observe(previous: Observation | None, lock: LockItem | None, now: float) -> Observation:
    rvn = None if lock is None else (lock.record_version or NO_VERSION)
    if previous is not None and previous.record_version == rvn:
        return previous
    return Observation(rvn, now)


@dataclass(frozen=True, slots=True)
class Held:
    """Our hold on the lock: the record version we wrote, and when that write was sent."""

    record_version: str
    sent_at: float
    duration_s: float


class Action(enum.Enum):
    WAIT = "wait"  # someone else holds a live lock
    ACQUIRE_ABSENT = "acquire (no lock)"
    ACQUIRE_RELEASED = "acquire (released)"
    STEAL = "steal (expired)"
    HEARTBEAT = "heartbeat"


@dataclass(frozen=True, slots=True)
class Plan:
    action: Action
    # STEAL: the record version the put is conditional on (None: conditional on there being none).
    expected_version: str | None = None
    reason: str = ""


#: A follower suspects the leader once the lock has stood unchanged this share of its duration: leaders
#: (ours and Java's) heartbeat every quarter of it, so this is a heartbeat missed, seen on two reads.
SUSPECT_AFTER: Final = 0.375


def leader_suspect(lock: LockItem | None, seen: Observation | None, now: float) -> bool:
    """Whether a follower should start observing the lease table's counters (``PassKind.OBSERVE``): the
    leader may be dead (a heartbeat missed), or there is no leader at all. ``seen`` includes the last
    read of ``lock``; None: the lock was never read."""
    if seen is None:
        return False
    if lock is None or lock.released:
        return True
    return now - seen.since > lock.duration_s * SUSPECT_AFTER


def heartbeat_landed(lock: LockItem | None, me: str, unconfirmed: Sequence[Held]) -> Held | None:
    """Of our heartbeats whose outcome is unknown (a timeout, a 500 after the write), the one the lock
    shows applied (None: none did, so someone else holds it now). Read after a heartbeat's condition
    failed: without this, a heartbeat that applied but was answered with an error made the next one
    fail its condition and the leader stepped down from a lock still naming it."""
    if lock is None or lock.owner != me or lock.released:
        return None
    return next((held for held in unconfirmed if held.record_version == lock.record_version), None)


def step_down_margin_s(duration_s: float) -> float:
    """How long before others may steal it a holder stops leading (10 %, at most 1 s)."""
    return min(duration_s * 0.1, 1.0)


def still_leader(held: Held | None, now: float) -> bool:
    """We hold the lock and nobody can have stolen it yet by their own observation."""
    if held is None:
        return False
    return now - held.sent_at < held.duration_s - step_down_margin_s(held.duration_s)


def plan(lock: LockItem | None, seen: Observation, me: str, held: Held | None, now: float) -> Plan:
    """What to do after reading the lock (``seen`` already includes this read)."""
    if lock is None:
        return Plan(Action.ACQUIRE_ABSENT, reason="no Leader item")
    if lock.released:
        return Plan(Action.ACQUIRE_RELEASED, reason=f"released by {lock.owner}")
    if held is not None and lock.owner == me and lock.record_version == held.record_version:
        return Plan(Action.HEARTBEAT, reason="we hold it")
    age = now - seen.since
    if age > lock.duration_s:
        return Plan(
            Action.STEAL,
            expected_version=lock.record_version,
            reason=f"{lock.owner or 'an unnamed owner'}'s lock unchanged for {age:.1f}s "
            f"> {lock.duration_s:.1f}s",
        )
    return Plan(Action.WAIT, reason=f"held by {lock.owner} (unchanged for {age:.1f}s)")
