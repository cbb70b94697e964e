"""Leases remembered by key between scans: an item unchanged since the last scan is not decoded again.

Every worker scans the whole lease table again and again (the 2.x taker's passes, the 3.x leader's
assignment, discovery), and between two scans almost every item is unchanged. Decoding an item into a
:class:`Lease` costs about fifty times comparing it with the item read last time, so the scan keeps the
last item and its lease per key and hands back the same (immutable) lease when the item compares equal.
A corrupt item is never remembered: it raises each time it is read, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import LEASE_KEY, lease_from_item


class LeaseMemo:
    """The last item read per lease key and its lease. Safe to share between scan threads (single dict
    operations under the GIL; a lost race only costs one decode)."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, tuple[Mapping[str, Any], Lease]] = {}

    def lease(self, item: Mapping[str, Any]) -> Lease:
        """The lease of ``item`` (a lease item), decoded only if it differs from the one read last time.

        Raises :class:`~kcl_daemon.core.leases.lease_codec.CorruptLeaseItem` like :func:`lease_from_item`."""
        key_value = item.get(LEASE_KEY)
        key = key_value.get("S") if isinstance(key_value, Mapping) else None
        if isinstance(key, str):
            seen = self._seen.get(key)
            if seen is not None and seen[0] == item:
                return seen[1]
        lease = lease_from_item(item)
        self._seen[lease.lease_key] = (item, lease)
        return lease

    def keep(self, keys: Iterable[str]) -> None:
        """Forget every key but these (the keys a whole scan found), so deleted leases do not pile up."""
        wanted = set(keys)
        for key in list(self._seen):
            if key not in wanted:
                self._seen.pop(key, None)

    def __len__(self) -> int:
        return len(self._seen)
