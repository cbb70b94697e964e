"""A worker's zone and the extra worker-metrics attribute that carries it to the leader. Pure.

Where a zone comes from, first match wins:

1. ``workerZone`` in the properties;
2. the environment (ECS task metadata, else EC2 IMDS availability zone), only with
   ``zoneFromEnvironment=true`` (the lookup itself is :mod:`kcl_daemon.leader.zone_lookup`);
3. the part of the ``workerId`` before ``leaseClusterSeparator`` (``clusterA-worker17`` -> ``clusterA``),
   when the id contains the separator;
4. none: the worker counts as one zone with every other zone-less worker.

What the assignor needs beyond Java's ``WorkerMetricStats`` travels in one extra map attribute,
:data:`EXTRA_ATTRIBUTE`, on the same item (Java reads the item through a bean schema and ignores
attributes it does not map, and its updates set only its own attributes, so the map survives). Inside
it: ``zone`` (S), ``capacity`` (N), ``state`` (S: ``active`` / ``restarting`` / ``leaving``) and
``graceUntil`` (N, epoch seconds, with ``restarting``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kcl_daemon.core.leader.decider import WorkerState

EXTRA_ATTRIBUTE: Final = "kdx"
ZONE: Final = "zone"
CAPACITY: Final = "capacity"
STATE: Final = "state"
GRACE_UNTIL: Final = "graceUntil"


class WorkerExtrasError(ValueError):
    """An extra worker-metrics attribute that cannot be read (names the worker and the field)."""


def zone_from_worker_id(worker_id: str, separator: str) -> str | None:
    """The part of ``worker_id`` before the first ``separator``; None without one (or with an empty part)."""
    if not separator or separator not in worker_id:
        return None
    prefix = worker_id.split(separator, 1)[0]
    return prefix or None


def resolve_zone(
    worker_id: str,
    separator: str,
    configured: str | None = None,
    from_environment: str | None = None,
) -> str | None:
    """The zone by the precedence in the module docstring."""
    if configured:
        return configured
    if from_environment:
        return from_environment
    return zone_from_worker_id(worker_id, separator)


def zone_from_ecs_task_metadata(body: str) -> str | None:
    """``AvailabilityZone`` from an ECS task metadata (v4) ``/task`` response; None if absent."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    zone = data.get("AvailabilityZone") if isinstance(data, dict) else None
    return zone if isinstance(zone, str) and zone else None


def zone_from_imds(body: str) -> str | None:
    """The IMDS ``placement/availability-zone`` response: one token such as ``eu-west-1a``."""
    zone = body.strip()
    return zone if zone and len(zone) < 64 and zone.replace("-", "").isalnum() else None


@dataclass(frozen=True, slots=True)
class WorkerExtras:
    """What a worker publishes for the assignor, next to Java's metrics."""

    zone: str | None = None
    capacity: float = 1.0
    state: WorkerState = WorkerState.ACTIVE
    grace_until_epoch_s: float | None = None


def extras_to_attribute(extras: WorkerExtras) -> dict[str, object]:
    """The map stored under :data:`EXTRA_ATTRIBUTE` (numbers as ints or floats, no None values)."""
    out: dict[str, object] = {CAPACITY: extras.capacity, STATE: extras.state.value}
    if extras.zone is not None:
        out[ZONE] = extras.zone
    if extras.grace_until_epoch_s is not None:
        out[GRACE_UNTIL] = extras.grace_until_epoch_s
    return out


def extras_from_attribute(worker_id: str, raw: object) -> WorkerExtras:
    """Read the map back; an absent attribute (a Java worker) means the defaults."""
    if raw is None:
        return WorkerExtras()
    if not isinstance(raw, Mapping):
        raise WorkerExtrasError(f"worker metrics of {worker_id}: {EXTRA_ATTRIBUTE} is not a map")
    zone = raw.get(ZONE)
    if zone is not None and not isinstance(zone, str):
        raise WorkerExtrasError(f"worker metrics of {worker_id}: {EXTRA_ATTRIBUTE}.{ZONE} is not a string")
    capacity = _number(worker_id, raw, CAPACITY, 1.0)
    if capacity is None or not math.isfinite(capacity) or capacity <= 0:
        raise WorkerExtrasError(f"worker metrics of {worker_id}: {EXTRA_ATTRIBUTE}.{CAPACITY} must be > 0")
    state_raw = raw.get(STATE, WorkerState.ACTIVE.value)
    try:
        state = WorkerState(state_raw)
    except ValueError:
        raise WorkerExtrasError(
            f"worker metrics of {worker_id}: {EXTRA_ATTRIBUTE}.{STATE} {state_raw!r} is not one of "
            + ", ".join(s.value for s in WorkerState)
        ) from None
    return WorkerExtras(zone or None, capacity, state, _number(worker_id, raw, GRACE_UNTIL, None))


def _number(worker_id: str, raw: Mapping[object, object], name: str, default: float | None) -> float | None:
    value = raw.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        try:
            return float(str(value))
        except ValueError:
            raise WorkerExtrasError(
                f"worker metrics of {worker_id}: {EXTRA_ATTRIBUTE}.{name} is not a number"
            ) from None
    return float(value)
