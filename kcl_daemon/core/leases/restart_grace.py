"""The restart grace marked on the leases themselves: who may judge a stopped worker's lease, and when. Pure.

A worker that stops with ``restartGraceMillis`` keeps its leases for its return. It used to say so only
in its worker-metrics item (RESTARTING), which the 3.x leader reads once per balance round: a leader
whose last read of the metrics predated the stop saw the worker renew nothing and judged it quiet, then
dead, and gave its leases away (issue 28), and in 2.x mode there is no metrics item to read at all. So
the stopping worker also writes the grace onto each lease it keeps, as its last write of the lease
(fenced on the counter it holds, and bumping it, like a renewal), in kcl-daemon's attribute
:data:`RESTART_ATTRIBUTE`: ``{"owner": S, "counter": N, "until": N}`` (the owner and the counter that
write produced; epoch milliseconds). Every judge reads the lease before it judges it, so whatever it has
or has not read elsewhere, it sees the grace:

* the mark *holds* while the lease stands exactly as the stopping worker left it (same owner, the
  counter it wrote, no hand-off mark) and ``until`` has not passed: any later write (the worker back
  and renewing, a take, an assignment, a checkpoint) bumps the counter and voids the mark, so it needs
  no clean-up and can never outlive the lease it was written on;
* while a mark holds, its owner is restarting: the 3.x leader treats it as RESTARTING
  (:func:`kcl_daemon.core.leader.passes.with_lease_graces`: never quiet, never dead, its leases wait
  for it) and a 2.x taker neither takes, steals nor evicts that lease, while the owner itself takes it
  back at once on its return (:func:`kcl_daemon.core.leases.taker.plan_takes`).

Java workers ignore the attribute (their lease serializer maps only its own attributes, and their
writes set only those): only kcl-daemon workers honour the grace. A mark that cannot be read is no mark.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from kcl_daemon.core.leases.lease import Lease

RESTART_ATTRIBUTE: Final = "kdxRestart"
_OWNER: Final = "owner"
_COUNTER: Final = "counter"
_UNTIL: Final = "until"


@dataclass(frozen=True, slots=True)
class RestartMark:
    """A stopping worker's grace on one lease: ``owner`` wrote counter ``counter``; kept until ``until_s``
    (epoch seconds)."""

    owner: str
    counter: int
    until_s: float


def mark_attribute(mark: RestartMark) -> dict[str, object]:
    """The DynamoDB value of :data:`RESTART_ATTRIBUTE` for ``mark`` (milliseconds, rounded up)."""
    return {
        "M": {
            _OWNER: {"S": mark.owner},
            _COUNTER: {"N": str(mark.counter)},
            _UNTIL: {"N": str(math.ceil(mark.until_s * 1000))},
        }
    }


def read_mark(lease: Lease) -> RestartMark | None:
    """The mark on ``lease`` as stored, or None (absent, or not of the form above)."""
    raw = lease.extra.get(RESTART_ATTRIBUTE)
    if not isinstance(raw, Mapping):
        return None
    fields = raw.get("M")
    if not isinstance(fields, Mapping):
        return None
    try:
        owner = fields[_OWNER]["S"]
        counter = int(fields[_COUNTER]["N"])
        until_ms = float(fields[_UNTIL]["N"])
    except (KeyError, TypeError, ValueError):
        return None
    if not isinstance(owner, str) or not owner or not math.isfinite(until_ms):
        return None
    return RestartMark(owner, counter, until_ms / 1000)


def grace_until(lease: Lease, now_s: float) -> float | None:
    """Until when (epoch seconds) ``lease`` waits for its restarting owner, or None if no grace holds at
    ``now_s`` (epoch seconds): see the module docstring."""
    mark = read_mark(lease)
    if mark is None or mark.until_s <= now_s:
        return None
    if lease.lease_owner != mark.owner or lease.lease_counter != mark.counter:
        return None
    if lease.checkpoint_owner is not None:
        return None
    return mark.until_s


def graced_leases(leases: Iterable[Lease], now_s: float) -> dict[str, str]:
    """The leases whose grace holds at ``now_s``: lease key -> the owner they wait for."""
    out: dict[str, str] = {}
    for lease in leases:
        if grace_until(lease, now_s) is not None and lease.lease_owner is not None:
            out[lease.lease_key] = lease.lease_owner
    return out


def restarting_owners(leases: Iterable[Lease], now_s: float) -> dict[str, float]:
    """The owners some lease of which waits for them at ``now_s``, with the latest grace end (epoch s)."""
    out: dict[str, float] = {}
    for lease in leases:
        until = grace_until(lease, now_s)
        if until is not None and lease.lease_owner is not None:
            out[lease.lease_owner] = max(out.get(lease.lease_owner, until), until)
    return out
