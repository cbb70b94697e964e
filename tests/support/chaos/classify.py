"""Why a chaos run delivered a record twice: lease takes parsed from the daemons' logs, and one pure rule.

A duplicate is a pair of deliveries of one record, ``first`` (by worker A) then ``second`` (by worker B),
in the order of the records file. Each delivery names its worker, its shard, ``t`` (the wall time its
batch reached the child) and ``since`` (the wall time that worker's child for the shard was initialized).
The reasons:

* ``crash``: the lease went from A to B through a worker that was SIGKILLed (A itself, or a later owner
  that was killed before it had re-sent the records A had not checkpointed);
* ``steal``: the lease went from A to B by steals only (the thief starts at the victim's last
  checkpoint, which the victim had delivered past); or B is the victim of a steal by A, and B's batch in
  flight when the lease was stolen still reached B's child (the victim learns of the steal at its next
  checkpoint or renewal, as in the Java KCL; not more than a failover time after the steal);
* ``lease expired``: anything else between two workers, e.g. the lease of a live worker taken because it
  was not renewed in time: the kind of duplicate fault handling must not cause;
* ``same worker``: delivered twice by one worker (a child restarted and the batch sent again).

The lease's way from A to B is the chain of takes of the shard, from every daemon's log, after A's take
(the last before A's child started) up to B's take (the last before B's child started). The previous
owner of a take is the one its log line names, else the worker of the take before it.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ALLOWED_REASONS = frozenset({"crash", "steal"})
SLACK_S = 1.0  # log stamps (ms) and the child's clock reading come from different processes

_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})")
_TAKEN = re.compile(r"lease (\S+) taken \((\w+)\): (.*)$")
_ADOPTED = re.compile(r"lease (\S+) adopted \(")
_STEAL_VICTIM = re.compile(r"stealing from most loaded worker (\S+)")
_EXPIRED_OWNER = re.compile(r"expired: owner (\S+) ")


@dataclass(frozen=True, slots=True)
class Take:
    """One ``lease ... taken (kind): reason`` line of a daemon's log."""

    when: float  # wall clock, seconds since the epoch
    kind: str  # priority, available or steal
    previous_owner: str | None  # the victim of a steal, or the owner of an expired lease; None if unknown


Takes = Mapping[str, Mapping[str, list[Take]]]  # worker -> shard -> takes in log order


def log_time(line: str) -> float | None:
    """The epoch time of a log line (human format: local time with milliseconds), None if it has none."""
    stamp = _LOG_TIME.match(line)
    if stamp is None:
        return None
    return time.mktime(time.strptime(stamp[1], "%Y-%m-%d %H:%M:%S")) + int(stamp[2]) / 1000


def parse_takes(log: str) -> dict[str, list[Take]]:
    """shard -> [Take] from one daemon's log (human format: local-time stamps with milliseconds): the 2.x
    taker's takes, and in leader mode the adoptions of leases the leader assigned (kind ``assigned``)."""
    found: dict[str, list[Take]] = defaultdict(list)
    for line in log.splitlines():
        when = log_time(line)
        if when is None:
            continue
        taken = _TAKEN.search(line)
        if taken is not None:
            owner = _STEAL_VICTIM.search(taken[3]) or _EXPIRED_OWNER.search(taken[3])
            found[taken[1]].append(Take(when, taken[2], owner[1] if owner else None))
        elif (adopted := _ADOPTED.search(line)) is not None:  # leader mode: the previous owner is unknown
            found[adopted[1]].append(Take(when, "assigned", None))
    return found


def _latest_take(takes: Takes, worker: str, shard: str, since: float) -> Take | None:
    """The take that started ``worker``'s child for ``shard`` at ``since``: its last one before then."""
    before = [take for take in takes.get(worker, {}).get(shard, []) if take.when <= since + SLACK_S]
    return before[-1] if before else None


def _chain(takes: Takes, shard: str, after: float, until: Take) -> list[tuple[str, str | None, Take]]:
    """(taker, previous owner, take) for every take of ``shard`` after ``after`` up to ``until``."""
    history = sorted(
        ((take, worker) for worker, shards in takes.items() for take in shards.get(shard, [])),
        key=lambda pair: pair[0].when,
    )
    chain: list[tuple[str, str | None, Take]] = []
    previous: str | None = None
    for take, worker in history:
        if take.when > after and take.when <= until.when:
            chain.append((worker, take.previous_owner or previous, take))
        previous = worker
    return chain


def classify(
    first: Mapping[str, Any], second: Mapping[str, Any], killed: set[str], takes: Takes, failover_s: float
) -> str:
    """Why ``second`` delivered a record ``first`` had delivered already (see the module docstring)."""
    a, b, shard = first["worker"], second["worker"], second["shard"]
    if a == b:
        return "same worker"
    if a in killed:
        return "crash"
    inf = float("inf")
    a_since, b_since = first.get("since", inf), second.get("since", inf)
    a_take = _latest_take(takes, a, shard, a_since)
    b_take = _latest_take(takes, b, shard, b_since)
    if b_take is not None:
        start = a_take.when if a_take is not None else a_since - SLACK_S
        chain = _chain(takes, shard, start, b_take)
        kinds = ["crash" if owner in killed else take.kind for _, owner, take in chain]
        if chain and chain[0][1] == a and set(kinds) <= ALLOWED_REASONS:
            return "crash" if "crash" in kinds else "steal"
    if (
        a_take is not None
        and a_take.kind == "steal"
        and a_take.previous_owner == b
        and b_since <= a_take.when + SLACK_S
        and second.get("t", inf) <= a_take.when + failover_s + SLACK_S
    ):
        return "steal"  # a stole it from b; b's batch in flight still reached b's child
    return "lease expired"


def describe(first: Mapping[str, Any], second: Mapping[str, Any], takes: Takes) -> str:
    """One line of evidence for a duplicate that no crash or steal explains."""

    def stamp(t: float) -> str:
        if t == float("inf"):
            return "never"
        seconds, millis = divmod(round(t * 1000), 1000)
        return time.strftime("%H:%M:%S", time.localtime(seconds)) + f".{millis:03d}"

    def history(worker: str, shard: str) -> str:
        seen = takes.get(worker, {}).get(shard, [])
        return ", ".join(f"{stamp(t.when)} {t.kind} from {t.previous_owner or '?'}" for t in seen) or "none"

    inf = float("inf")
    a, b = first, second
    return (
        f"{a['data']} on {b['shard']}: first {a['worker']} (child since {stamp(a.get('since', inf))}; "
        f"its takes: {history(a['worker'], a['shard'])}), then {b['worker']} (child since "
        f"{stamp(b.get('since', inf))}, batch at {stamp(b.get('t', inf))}; "
        f"its takes: {history(b['worker'], b['shard'])})"
    )
