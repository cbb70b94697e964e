"""Whether a fleet is balanced: every worker, and every zone, holds its capacity's share of the leases
(rounded either way)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Protocol


class Member(Protocol):
    """A live worker as the balance sees it."""

    @property
    def id(self) -> str: ...

    @property
    def zone(self) -> str | None: ...

    @property
    def capacity(self) -> float: ...


def is_balanced(total: int, members: Iterable[Member], counts: Mapping[str, int]) -> bool:
    """Whether ``counts`` (leases per worker id) gives each member, and each zone, its share of ``total``
    by capacity, give or take the rounding."""
    members = list(members)
    cap = sum(w.capacity for w in members)
    zone_cap: dict[str | None, float] = {}
    zone_count: dict[str | None, int] = {}
    for w in members:
        zone_cap[w.zone] = zone_cap.get(w.zone, 0.0) + w.capacity
        zone_count[w.zone] = zone_count.get(w.zone, 0) + counts[w.id]
        share = total * w.capacity / cap
        if not math.floor(share + 1e-9) <= counts[w.id] <= math.ceil(share - 1e-9):
            return False
    for z, zc in zone_cap.items():
        share = total * zc / cap
        if not math.floor(share + 1e-9) <= zone_count[z] <= math.ceil(share - 1e-9):
            return False
    return True
