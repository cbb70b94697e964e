"""Which lease algorithm a worker runs: ``clientVersionConfig`` and the ``Migration3.0`` item (contract §5.6).

A fleet must never run the 2.x taker and the 3.x leader on one table at once: the taker would steal what
the leader assigns. So the configured value only *proposes* a version; the ``Migration3.0`` item, shared
by every worker (Java ones included), decides. The rules are Java's
(``MigrationClientVersionStateInitializer``):

=====================================  =========================  =====================================
``clientVersionConfig``                ``Migration3.0`` ``cv``     runs as (and writes, when it says so)
=====================================  =========================  =====================================
``..._COMPATIBLE_WITH_2X_PHASE1``      none                       2.x, writes nothing (``INIT``)
``..._COMPATIBLE_WITH_2X``             none                       ``UPGRADE_FROM_2X`` (written)
``..._3X``                             none                       ``3X`` (written)
PHASE1 or COMPATIBLE_WITH_2X           ``3X_WITH_ROLLBACK``       ``3X_WITH_ROLLBACK``
``..._3X``                             ``3X_WITH_ROLLBACK``       ``3X`` (item updated)
any                                    ``2X``/``UPGRADE``/``3X``  as stored
=====================================  =========================  =====================================

Pure: the shell (:mod:`kcl_daemon.leader.mode`) reads the item, asks :func:`resolve`, writes what
it says (conditionally on what it read) and runs the algorithm of :func:`algorithm_of`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final


class ClientVersionConfig(enum.Enum):
    """The ``clientVersionConfig`` key (Java's names)."""

    COMPATIBLE_WITH_2X_PHASE1 = "CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1"
    COMPATIBLE_WITH_2X = "CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X"
    V3X = "CLIENT_VERSION_CONFIG_3X"


class ClientVersion(enum.Enum):
    """The ``cv`` attribute of ``Migration3.0`` (``INIT`` is local only: nothing stored, pure 2.x)."""

    INIT = "CLIENT_VERSION_INIT"
    UPGRADE_FROM_2X = "CLIENT_VERSION_UPGRADE_FROM_2X"
    V2X = "CLIENT_VERSION_2X"
    V3X_WITH_ROLLBACK = "CLIENT_VERSION_3X_WITH_ROLLBACK"
    V3X = "CLIENT_VERSION_3X"


class Algorithm(enum.Enum):
    """What the worker runs."""

    TAKER = "2.x taker"  # every worker scans and takes (contract §4.4)
    LEADER = "3.x leader"  # one elected leader assigns; workers discover via the GSI (contract §5.1)


CONFIG_CHOICES: Final = tuple(c.value for c in ClientVersionConfig)
MIGRATION_KEY: Final = "Migration3.0"
HISTORY_LIMIT: Final = 10


@dataclass(frozen=True, slots=True)
class Resolution:
    """What to run, and what (if anything) to write to ``Migration3.0`` first."""

    version: ClientVersion
    # Write this cv (conditionally on ``expected``: the cv read, or None = the item must not exist).
    write: ClientVersion | None
    expected: ClientVersion | None
    reason: str

    @property
    def algorithm(self) -> Algorithm:
        return algorithm_of(self.version)


def algorithm_of(version: ClientVersion) -> Algorithm:
    """2.x algorithms for INIT, 2X and UPGRADE_FROM_2X; the leader for both 3.x versions."""
    if version in (ClientVersion.V3X, ClientVersion.V3X_WITH_ROLLBACK):
        return Algorithm.LEADER
    return Algorithm.TAKER


def publishes_worker_metrics(version: ClientVersion) -> bool:
    """UPGRADE_FROM_2X already reports metrics (so the fleet can flip); INIT and 2X never do."""
    return version not in (ClientVersion.INIT, ClientVersion.V2X)


def parse_client_version(text: str | None) -> ClientVersion | None:
    """The stored ``cv``; None when absent. An unknown value raises ValueError naming it."""
    if text is None:
        return None
    for version in ClientVersion:
        if version.value == text and version is not ClientVersion.INIT:
            return version
    raise ValueError(f"Migration3.0 holds an unknown client version cv={text!r}")


def resolve(config: ClientVersionConfig, stored: ClientVersion | None) -> Resolution:
    """contract §5.6: the configured value against the stored one."""
    if stored is None:
        match config:
            case ClientVersionConfig.COMPATIBLE_WITH_2X_PHASE1:
                return Resolution(ClientVersion.INIT, None, None, "no Migration3.0 item; phase 1: pure 2.x")
            case ClientVersionConfig.COMPATIBLE_WITH_2X:
                return Resolution(
                    ClientVersion.UPGRADE_FROM_2X,
                    ClientVersion.UPGRADE_FROM_2X,
                    None,
                    "no Migration3.0 item; 2.x-compatible upgrade",
                )
            case ClientVersionConfig.V3X:
                return Resolution(
                    ClientVersion.V3X, ClientVersion.V3X, None, "no Migration3.0 item; pure 3.x"
                )
    if stored is ClientVersion.V3X_WITH_ROLLBACK:
        if config is ClientVersionConfig.V3X:
            return Resolution(
                ClientVersion.V3X, ClientVersion.V3X, stored, "3.x configured: the rollback window ends"
            )
        return Resolution(stored, None, None, "the fleet has flipped to 3.x (rollback still possible)")
    return Resolution(stored, None, None, f"as stored in Migration3.0 ({stored.value})")


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    cv: str
    mb: str
    mts: int


def migration_attributes(
    version: ClientVersion, worker_id: str, now_ms: int, history: Sequence[HistoryEntry]
) -> Mapping[str, object]:
    """The attributes of ``Migration3.0`` for ``version`` (plain values; the shell types them).

    Java keeps the previous states in ``h``, newest first, at most 10: pass them in ``history``."""
    entries = list(history)[:HISTORY_LIMIT]
    return {
        "cv": version.value,
        "mb": worker_id,
        "mts": now_ms,
        "h": [{"cv": e.cv, "mb": e.mb, "mts": e.mts} for e in entries],
    }


#: How long the fleet must look ready before a 2.x-compatible fleet flips to 3.x (Java: 10 minutes).
READY_STABLE_S: Final = 600.0


def fleet_ready_for_3x(
    gsi_active: bool,
    lease_owners: Sequence[str | None],
    metrics_updated_s: Mapping[str, float],
    now_s: float,
    reporter_period_s: float,
) -> tuple[bool, str]:
    """Java's ``MigrationReadyMonitor`` check, once: the ``LeaseOwnerToLeaseKeyIndex`` is ACTIVE and every
    distinct lease owner has a WorkerMetricStats entry updated within 2 x the reporter period (so every
    worker runs 3.x-capable code). As in Java, an unowned lease counts as an owner nobody matches."""
    if not gsi_active:
        return False, "the LeaseOwnerToLeaseKeyIndex is not ACTIVE"
    for owner in sorted(set(lease_owners), key=lambda o: (o is None, o or "")):
        if owner is None:
            return False, "a lease has no owner"
        updated = metrics_updated_s.get(owner)
        if updated is None or now_s - updated > 2 * reporter_period_s:
            return False, f"worker {owner} publishes no current WorkerMetricStats (a KCL 2.x worker?)"
    return True, "every lease owner runs 3.x-capable code"
