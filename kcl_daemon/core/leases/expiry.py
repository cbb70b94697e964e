"""Local observation of lease counters: when did this process last see each lease's counter change?

Nothing in the lease table says when a lease was last renewed. Every observer (taker and renewer)
keeps its own record, on its own monotonic clock, of when it last saw ``leaseCounter`` change, and a
lease is expired when that was more than the failover time ago (contract §4.3, "local expiry semantics"):

* a lease seen for the first time *without* an owner counts as last changed at "time 0": immediately
  expired and "very old" (Java stores ``0L`` on a ``System.nanoTime`` clock; we store ``-inf`` so the
  rule holds whatever the origin of the caller's monotonic clock, even just after boot);
* a lease seen for the first time *with* an owner counts as changed at the scan time;
* a known lease whose counter changed counts as changed at the scan time, otherwise it keeps its time;
* leases missing from the scan are forgotten;
* an age whose absolute value exceeds 365 days also counts as expired (Java's guard against a clock
  jump), and a lease never observed at all is expired.

``now`` is monotonic seconds (float), always passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from kcl_daemon.core.leases.lease import Lease

NEVER_CHANGED: Final = float("-inf")
#: a due time is acted on this long after it (the expiry rule is "older than", not "as old as")
DUE_EPSILON_S: Final = 0.05
MAX_ABS_AGE_S: Final = 365 * 24 * 3600.0
VERY_OLD_MULTIPLIER: Final = 3

_NO_ENTRIES: Final[Mapping[str, CounterObservation]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class CounterObservation:
    """The counter last seen for one lease, and when (monotonic seconds) it was last seen to change."""

    lease_counter: int
    changed_at: float


@dataclass(frozen=True, slots=True)
class LeaseObservations:
    """An immutable table ``lease_key -> CounterObservation``; every update returns a new table."""

    entries: Mapping[str, CounterObservation] = field(default_factory=lambda: _NO_ENTRIES, hash=False)

    def __post_init__(self) -> None:
        if self.entries is not _NO_ENTRIES:
            object.__setattr__(self, "entries", MappingProxyType(dict(self.entries)))

    def observe(self, leases: Iterable[Lease], now: float) -> LeaseObservations:
        """The table after a full scan that returned ``leases`` at time ``now``."""
        updated: dict[str, CounterObservation] = {}
        for lease in leases:
            old = self.entries.get(lease.lease_key)
            if old is not None:
                changed_at = old.changed_at if old.lease_counter == lease.lease_counter else now
            elif lease.lease_owner is None:
                changed_at = NEVER_CHANGED
            else:
                changed_at = now
            updated[lease.lease_key] = CounterObservation(lease.lease_counter, changed_at)
        return _owning(updated)

    def record_write(self, lease_key: str, lease_counter: int, now: float) -> LeaseObservations:
        """The table after this process itself moved ``lease_key`` to ``lease_counter`` (take or renew)."""
        return self.record_writes({lease_key: CounterObservation(lease_counter, now)})

    def record_writes(self, writes: Mapping[str, CounterObservation]) -> LeaseObservations:
        """The table after this process's own writes, each ``lease_key -> CounterObservation(counter,
        sent at)``, the last of each lease: the same as :meth:`record_write` for each in turn, with one
        copy of the table."""
        updated = dict(self.entries)
        updated.update(writes)
        return _owning(updated)

    def get(self, lease_key: str) -> CounterObservation | None:
        return self.entries.get(lease_key)

    def next_expiry(self, now: float, failover_s: float, keys: Iterable[str] | None = None) -> float | None:
        """When the first of ``keys`` (default: every lease seen) that is not expired yet would be, if
        its counter stays as seen: plus :data:`DUE_EPSILON_S`, since the rule is "older than"."""
        chosen = self.entries.keys() if keys is None else keys
        dues = [
            observed.changed_at + failover_s + DUE_EPSILON_S
            for key in chosen
            if (observed := self.entries.get(key)) is not None and not self.is_expired(key, now, failover_s)
        ]
        return min(dues, default=None)

    def age(self, lease_key: str, now: float) -> float:
        """Seconds since the counter of ``lease_key`` was last seen to change (``inf`` if never)."""
        observed = self.entries.get(lease_key)
        if observed is None:
            return float("inf")
        return now - observed.changed_at

    def is_expired(self, lease_key: str, now: float, failover_s: float) -> bool:
        """No counter change observed for more than ``failover_s`` (Java ``Lease.isExpired``)."""
        observed = self.entries.get(lease_key)
        if observed is None:
            return True
        age = now - observed.changed_at
        return abs(age) > MAX_ABS_AGE_S or age > failover_s

    def is_very_old(
        self, lease_key: str, now: float, failover_s: float, multiplier: int = VERY_OLD_MULTIPLIER
    ) -> bool:
        """Unchanged for more than ``multiplier x failover_s``: taken with priority (contract §4.4 step 5)."""
        observed = self.entries.get(lease_key)
        if observed is None:
            return True
        return now - multiplier * failover_s > observed.changed_at


def _owning(entries: dict[str, CounterObservation]) -> LeaseObservations:
    """A table over a dict made for it and held by nobody else: no defensive copy. Every renewal records
    its write here, so with hundreds of leases the second copy was a cost that grew with the lease count."""
    table = object.__new__(LeaseObservations)
    object.__setattr__(table, "entries", MappingProxyType(entries))
    return table


#: The share of the failover time by which a held lease counts as lost *before* the others may see it
#: expire, so that its child is told (and no checkpoint is accepted) before anyone can take it over.
LOCAL_EXPIRY_MARGIN_SHARE: Final = 0.1
LOCAL_EXPIRY_MARGIN_MAX_S: Final = 1.0


def expiry_interval_for(failover_s: float) -> float:
    """How often kcl-daemon looks for expired leases between Java's full rounds (the 2.x taker's runs,
    the 3.x leader's balance rounds), and a 3.x worker for leases assigned to it: ``min(1 s, failover /
    10)``, at least 50 ms."""
    return max(min(1.0, failover_s / 10), 0.05)


def local_expiry_margin_s(failover_s: float) -> float:
    return min(failover_s * LOCAL_EXPIRY_MARGIN_SHARE, LOCAL_EXPIRY_MARGIN_MAX_S)


def held_lease_deadline(last_write_sent_at: float, failover_s: float) -> float:
    """When a lease we hold is lost by our own clock (monotonic seconds).

    Another worker starts timing a counter when it first *sees* it, which is after our write was applied
    and so after we *sent* it: ``sent + failover`` is the earliest moment anyone may consider the lease
    expired. We give it up a margin before that (``min(10 % of failover, 1 s)``), so the child is stopped
    before another worker can have taken the lease.
    """
    return last_write_sent_at + failover_s - local_expiry_margin_s(failover_s)
