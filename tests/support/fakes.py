"""In-memory fakes shared by several test modules: the coordinator-state table the leader election
writes its lock to, and the counter-fenced 2.x lease table the coordinator works on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kcl_daemon.core.leases.heartbeat import WORKER_KEY, RenewalMode, WorkerItem, worker_item_from
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_reads import StealNotice
from kcl_daemon.core.leases.restart_grace import RESTART_ATTRIBUTE, RestartMark, mark_attribute
from kcl_daemon.core.sequence import TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.errors import LeaseConflict, TransientNetwork


class FakeStore:
    """Conditional puts/updates/deletes of single items, as the coordinator-state table does them."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.failing = False

    def _check(
        self,
        key: str,
        require_absent: bool = False,
        require_equal: Mapping[str, Any] | None = None,
        require_missing: tuple[str, ...] = (),
    ) -> None:
        if self.failing:
            raise TransientNetwork("connection reset")
        item = self.items.get(key)
        if require_absent:
            if item is not None:
                raise LeaseConflict("exists")
            return
        if item is None or any(item.get(k) != v for k, v in (require_equal or {}).items()):
            raise LeaseConflict("condition failed")
        if any(name in item for name in require_missing):
            raise LeaseConflict("condition failed")

    def get(self, key: str) -> dict[str, Any] | None:
        if self.failing:
            raise TransientNetwork("connection reset")
        item = self.items.get(key)
        return None if item is None else dict(item)

    def put(
        self,
        key: str,
        attributes: Mapping[str, Any],
        *,
        require_absent: bool = False,
        require_equal: Mapping[str, Any] | None = None,
        require_missing: tuple[str, ...] = (),
        entity_type: str | None = None,
    ) -> None:
        self._check(key, require_absent, require_equal, require_missing)
        self.items[key] = dict(attributes)

    def update(self, key: str, sets: Mapping[str, Any], *, require_equal: Mapping[str, Any]) -> None:
        self._check(key, False, require_equal)
        self.items[key].update(sets)

    def delete(self, key: str, *, require_equal: Mapping[str, Any]) -> None:
        self._check(key, False, require_equal)
        del self.items[key]


@dataclass
class Scan:
    leases: list[Lease]
    skipped: list[str] = field(default_factory=list)
    workers: list[dict[str, dict[str, str]]] = field(default_factory=list)


class FakeTable:
    """Conditional writes fenced on leaseCounter, like DynamoDB with the KCL conditions."""

    def __init__(self, leases: list[Lease]) -> None:
        self.items = {lease.lease_key: lease for lease in leases}

    def list_leases(self, *, consistent: bool = False) -> Scan:
        return Scan(list(self.items.values()))

    def get_lease(self, lease_key: str, *, consistent: bool = False) -> Lease | None:
        return self.items.get(lease_key)

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

    def checkpoint(self, lease: Lease, checkpoint: ExtendedSequenceNumber, **_: object) -> Lease:
        self._check(lease)
        self.items[lease.lease_key] = replace(
            lease, checkpoint=checkpoint, lease_counter=lease.lease_counter + 1
        )
        return self.items[lease.lease_key]

    def release(self, lease: Lease) -> Lease:
        self._check(lease)
        self.items[lease.lease_key] = replace(lease, lease_owner=None, lease_counter=lease.lease_counter + 1)
        return self.items[lease.lease_key]

    def mark_restart(self, lease: Lease, until_s: float) -> Lease:
        self._check(lease)
        assert lease.lease_owner is not None
        mark = RestartMark(lease.lease_owner, lease.lease_counter + 1, until_s)
        extra = {**lease.extra, RESTART_ATTRIBUTE: mark_attribute(mark)}
        self.items[lease.lease_key] = replace(lease, lease_counter=lease.lease_counter + 1, extra=extra)
        return self.items[lease.lease_key]


def shards(count: int) -> list[Lease]:
    return [
        Lease(lease_key=f"shardId-{i:012d}", lease_counter=0, checkpoint=TRIM_HORIZON) for i in range(count)
    ]


def owned_by(owner: str, count: int) -> list[Lease]:
    return [lease.taken_by(owner) for lease in shards(count)]


class HeartbeatFakeTable(FakeTable):
    """A FakeTable that also keeps the heartbeat place (per-worker renewal): the workers' items of the
    worker-metrics table, key ``wid``; Java 3.x workers' metrics reports go in ``workers`` too."""

    def __init__(self, leases: list[Lease]) -> None:
        super().__init__(leases)
        self.workers: dict[str, dict[str, Any]] = {}
        self.heartbeats = 0

    def heartbeat_items(self) -> list[dict[str, Any]]:
        return [dict(item) for item in self.workers.values()]

    def heartbeat(
        self, worker_id: str, mode: RenewalMode, notices: Mapping[str, StealNotice] | None = None
    ) -> WorkerItem:
        item = self.workers.setdefault(worker_id, {WORKER_KEY: {"S": worker_id}})
        if notices:
            item["kdst"] = {"M": {k: {"N": str(n.lease_counter)} for k, n in notices.items()}}
        elif notices is not None:
            item.pop("kdst", None)
        item["kdhb"] = {"N": str(int(item.get("kdhb", {"N": "0"})["N"]) + 1)}
        item["kdrm"] = {"S": mode.value}
        item.setdefault("lut", {"N": "0"})
        self.heartbeats += 1
        return worker_item_from(item)

    def withdraw_heartbeat(self, worker_id: str) -> bool:
        return self.workers.pop(worker_id, None) is not None
