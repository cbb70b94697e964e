"""In-memory coordinator-state places for the KCL 3.5 layout tests: a conditional single-item store that
behaves like :class:`kcl_daemon.aws.coordinator_state.CoordinatorStore` (legacy table or lease table,
``entityType`` kinds, transactions), a worker-metrics place, and :func:`fake_tables` wiring both places
into a :class:`kcl_daemon.leader.tables.Tables`."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kcl_daemon.core.leader.client_version import ClientVersionConfig
from kcl_daemon.core.leader.table_migration import Place, TableLayoutConfig
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.errors import DependencyUnavailable, LeaseConflict, TransientNetwork
from kcl_daemon.leader.tables import Tables, TablesConfig


class FakeCoordinatorStore:
    """Items are plain dicts keyed by the partition key's value (the key attribute is not stored)."""

    def __init__(self, table_name: str, key_name: str = "key", *, exists: bool = True) -> None:
        self.table_name = table_name
        self.key_name = key_name
        self.items: dict[str, dict[str, Any]] = {}
        self.present = exists
        self.failing = False
        self.writes: list[tuple[str, str]] = []  # (operation, key)

    @property
    def in_lease_table(self) -> bool:
        return self.key_name == "leaseKey"

    def exists(self) -> bool:
        return self.present

    def create_table_if_missing(self) -> bool:
        created, self.present = not self.present, True
        return created

    def _live(self) -> None:
        if self.failing:
            raise TransientNetwork("connection reset")
        if not self.present:
            raise DependencyUnavailable(f"{self.table_name}: ResourceNotFoundException")

    def _check(
        self,
        key: str,
        require_absent: bool = False,
        require_equal: Mapping[str, Any] | None = None,
        require_missing: tuple[str, ...] = (),
    ) -> None:
        item = self.items.get(key)
        if require_absent:
            if item is not None:
                raise LeaseConflict(f"{key} exists")
            return
        if item is None or any(item.get(k) != v for k, v in (require_equal or {}).items()):
            raise LeaseConflict(f"{key}: condition failed")
        if any(name in item for name in require_missing):
            raise LeaseConflict(f"{key}: condition failed")

    def get(self, key: str) -> dict[str, Any] | None:
        self._live()
        item = self.items.get(key)
        return None if item is None else {self.key_name: key, **copy.deepcopy(item)}

    def item(self, key: str, attributes: Mapping[str, Any], entity_type: str | None = None) -> dict[str, Any]:
        item = {self.key_name: key, **copy.deepcopy(dict(attributes))}
        if entity_type is not None and self.in_lease_table:
            item["entityType"] = entity_type
        return item

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
        self._live()
        self._check(key, require_absent, require_equal, require_missing)
        item = self.item(key, attributes, entity_type)
        del item[self.key_name]
        self.items[key] = item
        self.writes.append(("put", key))

    def update(
        self,
        key: str,
        sets: Mapping[str, Any],
        *,
        require_equal: Mapping[str, Any] | None = None,
        entity_type: str | None = None,
    ) -> None:
        self._live()
        if require_equal is not None:
            self._check(key, False, require_equal)
        current = self.items.get(key)
        if entity_type is not None and self.in_lease_table:
            if current is not None and current.get("entityType") != entity_type:
                raise LeaseConflict(f"{key} is not a {entity_type} item")
            sets = {**sets, "entityType": entity_type}
        self.items.setdefault(key, {}).update(copy.deepcopy(dict(sets)))
        self.writes.append(("update", key))

    def delete(
        self, key: str, *, require_equal: Mapping[str, Any] | None = None, entity_type: str | None = None
    ) -> None:
        self._live()
        if entity_type is not None and self.in_lease_table:
            require_equal = {**(require_equal or {}), "entityType": entity_type}
        if require_equal is not None:
            self._check(key, False, require_equal)
        self.items.pop(key, None)
        self.writes.append(("delete", key))

    def scan(self, entity_type: str | None = None) -> list[dict[str, Any]]:
        self._live()
        return [
            {self.key_name: key, **copy.deepcopy(item)}
            for key, item in self.items.items()
            if entity_type is None or item.get("entityType") == entity_type
        ]

    def raw_item(self, key: str) -> dict[str, Any] | None:
        return self.get(key)

    def adopt(
        self, key: str, raw: Mapping[str, Any], source_key_name: str, entity_type: str
    ) -> dict[str, Any]:
        item = {self.key_name: key, **{n: v for n, v in raw.items() if n != source_key_name}}
        if self.in_lease_table:
            item["entityType"] = entity_type
        return item

    # -- transactions ----------------------------------------------------------------------------

    def condition_check(self, key: str, require_equal: Mapping[str, Any]) -> dict[str, Any]:
        return {"op": "check", "store": self, "key": key, "equal": dict(require_equal)}

    def put_entry(
        self,
        item: dict[str, Any],
        *,
        require_absent: bool = False,
        require_equal: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        return {
            "op": "put",
            "store": self,
            "key": item[self.key_name],
            "item": item,
            "absent": require_absent,
            "equal": dict(require_equal or {}),
        }

    def delete_entry(self, key: str, *, require_equal: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {"op": "delete", "store": self, "key": key, "equal": dict(require_equal or {})}

    def transact(self, entries: list[dict[str, Any]], what: str) -> None:
        """All conditions first, then every write (all or nothing)."""
        for entry in entries:
            store: FakeCoordinatorStore = entry["store"]
            store._live()
            if entry["op"] == "check" or (entry["op"] == "delete" and entry["equal"]):
                store._check(entry["key"], False, entry["equal"])
            elif entry["op"] == "put":
                if entry["absent"]:
                    store._check(entry["key"], True)
                elif entry["equal"]:
                    store._check(entry["key"], False, entry["equal"])
        for entry in entries:
            store = entry["store"]
            if entry["op"] == "put":
                item = dict(entry["item"])
                del item[store.key_name]
                store.items[entry["key"]] = item
                store.writes.append(("transact put", entry["key"]))
            elif entry["op"] == "delete":
                store.items.pop(entry["key"], None)
                store.writes.append(("transact delete", entry["key"]))


class FakeMetricsTable:
    """One place's WorkerMetricStats rows."""

    def __init__(self, place: Place, *, exists: bool = True, table_name: str | None = None) -> None:
        self.place = place
        self.table_name = table_name or ("app-WorkerMetricStats" if place is Place.LEGACY else "app")
        self.rows: dict[str, WorkerMetricStats] = {}
        self.present = exists
        self.failing = False

    def exists(self) -> bool:
        return self.present

    def create_table_if_missing(self) -> bool:
        created, self.present = not self.present, True
        return created

    def _live(self) -> None:
        if self.failing:
            raise TransientNetwork("connection reset")
        if not self.present:
            raise DependencyUnavailable("WorkerMetricStats: ResourceNotFoundException")

    def publish(self, stats: WorkerMetricStats) -> None:
        self._live()
        self.rows[stats.worker_id] = stats

    def scan(self) -> tuple[list[WorkerMetricStats], list[str]]:
        self._live()
        return list(self.rows.values()), []

    def delete(self, worker_id: str) -> None:
        self._live()
        self.rows.pop(worker_id, None)

    def delete_stale(self, worker_id: str, observed_lut: float) -> None:
        row = self.rows.get(worker_id)
        if row is None or row.last_update_s != observed_lut:
            raise LeaseConflict("lut changed")
        del self.rows[worker_id]


def fake_tables(
    worker_id: str,
    *,
    legacy: bool = True,
    migrate_all: bool = False,
    layout: TableLayoutConfig | None = TableLayoutConfig.SINGLE_TABLE,
    client_version: ClientVersionConfig = ClientVersionConfig.V3X,
    shared: Tables | None = None,
) -> Tables:
    """A worker's :class:`Tables` on fresh places, or on the places of ``shared`` (another worker's)."""
    if shared is not None:
        places = (shared.legacy, shared.lease_table, shared.legacy_metrics, shared.lease_table_metrics)
    else:
        places = (
            FakeCoordinatorStore("app-CoordinatorState", exists=legacy),
            FakeCoordinatorStore("app", "leaseKey"),
            FakeMetricsTable(Place.LEGACY, exists=legacy),
            FakeMetricsTable(Place.LEASE_TABLE),
        )
    return Tables(*places, TablesConfig(worker_id, migrate_all, layout, client_version))
