"""What the lease-assignment modes need from the tables below them, as small protocols.

The DynamoDB adapters implement them (:class:`~kcl_daemon.aws.lease_table_3x.LeaseTable3x`,
:class:`~kcl_daemon.aws.coordinator_state.CoordinatorStore`,
:class:`~kcl_daemon.aws.worker_metrics_table.WorkerMetricsTable`), fakes in the tests; each loop names only
the calls it makes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from kcl_daemon.core.leader.table_migration import Place
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import CorruptLeaseItem, ScanResultLike


class HandoffTable(Protocol):
    """The one write of a hand-off: the lease to its new owner."""

    def assign(self, lease: Lease, new_owner: str, *, fence_counter: bool = True) -> Lease: ...


class AssignmentTable(HandoffTable, Protocol):
    """The leader's reads and writes of the lease table."""

    def list_leases(self, *, consistent: bool = False) -> ScanResultLike: ...

    def initiate_handoff(self, lease: Lease, new_owner: str) -> Lease: ...


class HeartbeatSource(Protocol):
    """Where the workers' heartbeats are (``leaseRenewal = PER_WORKER``): the heartbeat place's items."""

    def heartbeat_items(self) -> Sequence[Mapping[str, Any]]: ...


class DiscoveryTable(Protocol):
    """A follower's reads: the keys assigned to it (the owner index), then those leases."""

    def lease_keys_owned_by(self, worker_id: str) -> list[str]: ...

    def get_leases(
        self, lease_keys: Iterable[str], *, consistent: bool = False
    ) -> Mapping[str, Lease | CorruptLeaseItem | None]: ...


class LeaderTable(AssignmentTable, DiscoveryTable, Protocol):
    """The lease table as the KCL 3.x mode uses it: every loop's calls, the owner index's state, and where
    the renewals read each lease's throughput from."""

    throughput_source: Callable[[str], float | None] | None

    def gsi_active(self) -> bool: ...


class MetricsScan(Protocol):
    """Every worker's metrics row: (the rows read, one message per row skipped)."""

    def scan(self) -> tuple[list[WorkerMetricStats], list[str]]: ...


class FleetMetricsSource(MetricsScan, Protocol):
    """The rows, and the leader's delete of a row that went stale."""

    def delete_stale(self, worker_id: str, observed_lut: float) -> None: ...


class MetricsPlace(FleetMetricsSource, Protocol):
    """Worker metrics rows in one place (the legacy table, or the lease table)."""

    @property
    def place(self) -> Place: ...

    @property
    def table_name(self) -> str: ...

    def create_table_if_missing(self) -> bool: ...

    def publish(self, stats: WorkerMetricStats) -> None: ...

    def delete(self, worker_id: str) -> None: ...


class LockStore(Protocol):
    """Conditional single-item access to where the ``Leader`` lock lives (plain attribute values)."""

    def get(self, key: str) -> Mapping[str, object] | None: ...

    def put(
        self,
        key: str,
        attributes: Mapping[str, object],
        *,
        require_absent: bool = False,
        require_equal: Mapping[str, object] | None = None,
        require_missing: tuple[str, ...] = (),
        entity_type: str | None = None,
    ) -> None: ...

    def update(
        self,
        key: str,
        sets: Mapping[str, object],
        *,
        require_equal: Mapping[str, object] | None = None,
        entity_type: str | None = None,
    ) -> None: ...

    def delete(
        self, key: str, *, require_equal: Mapping[str, object] | None = None, entity_type: str | None = None
    ) -> None: ...
