"""The KCL 3.x lease mode's configuration, from the leader's and the leases' slices of the settings
(contract §4.3 timings: assignment every 2 x failover; discovery, as the leader's expiry passes, every
min(1 s, failover / 10))."""

from __future__ import annotations

import logging

from kcl_daemon.config.slices import LeaderSlice, LeaseSlice
from kcl_daemon.core.leader.client_version import ClientVersionConfig
from kcl_daemon.core.leader.decider import DeciderConfig
from kcl_daemon.core.leader.table_migration import effective_complete_bake_s
from kcl_daemon.core.leader.zones import resolve_zone
from kcl_daemon.core.leases.timings import discovery_period_s
from kcl_daemon.leader.assignment_config import AssignmentConfig
from kcl_daemon.leader.mode import LeaderModeConfig
from kcl_daemon.leader.worker_metrics import WorkerMetricsConfig
from kcl_daemon.leader.zone_lookup import zone_from_environment

logger = logging.getLogger(__name__)


def leader_mode_config(leader: LeaderSlice, leases: LeaseSlice, worker_id: str) -> LeaderModeConfig:
    """The lease mode of worker ``worker_id``: client version, assignment, worker metrics, leader lock."""
    interval = leases.assignment_interval_s
    return LeaderModeConfig(
        worker_id=worker_id,
        client_version=ClientVersionConfig(leader.client_version_config),
        strategy=leader.strategy,
        assignment=AssignmentConfig(
            interval_s=interval,
            failover_s=leases.failover_s,
            expiry_interval_s=leases.expiry_check_s,
            handoff_timeout_s=leader.handoff_timeout_s,
            graceful_handoff=leader.graceful_handoff,
            reporter_period_s=leader.worker_metrics_report_s,
            decider=DeciderConfig(
                failover_s=leases.failover_s,
                max_leases_for_worker=leases.max_leases_for_worker,
                rebalance_threshold_percent=leader.rebalance_threshold_percent,
                dampening_percent=leader.dampening_percent,
                allow_throughput_overshoot=leader.allow_throughput_overshoot,
                graceful_handoff=leader.graceful_handoff,
                max_handoffs_per_worker=leader.max_handoffs_per_worker,
            ),
        ),
        metrics=WorkerMetricsConfig(
            worker_id,
            capture_s=leader.worker_metrics_capture_s,
            report_s=leader.worker_metrics_report_s,
            history=leader.worker_metrics_history,
            disabled=leader.disable_worker_metrics,
            zone=worker_zone(leader, leases.cluster_separator, worker_id),
        ),
        # Java queries at half the assignment interval (10 s at the defaults); a KEYS_ONLY query of one key
        # every min(1 s, failover / 10) lets a worker start a lease moved to it within about a second
        discovery_s=discovery_period_s(interval, leases.expiry_check_s),
        lock_duration_s=leader.lock_duration_s,
        lock_heartbeat_s=leader.lock_heartbeat_s,
        handoff_timeout_s=leader.handoff_timeout_s,
        balancing_frequency=leader.balancing_frequency,
        restart_grace_s=restart_grace_s(leader),
        migrate_all=leader.migrate_all,
        complete_bake_s=effective_complete_bake_s(leader.complete_bake_s)[0],
        init_bake_s=leader.init_bake_s,
        per_worker=leases.lease_renewal == "PER_WORKER",
    )


def restart_grace_s(leader: LeaderSlice) -> float:
    """``restartGraceMillis``, only with a configured workerId: a random one never comes back."""
    if leader.restart_grace_s > 0 and not leader.fixed_worker_id:
        logger.warning(
            "restartGraceMillis ignored: it needs a fixed workerId (a restart gets a new random one)"
        )
        return 0.0
    return leader.restart_grace_s


def worker_zone(leader: LeaderSlice, cluster_separator: str, worker_id: str) -> str | None:
    """workerZone, else the environment (zoneFromEnvironment), else the workerId prefix (core.zones)."""
    from_environment = zone_from_environment() if leader.zone_from_environment else None
    zone = resolve_zone(worker_id, cluster_separator, leader.worker_zone, from_environment)
    logger.info("worker %s: zone %s", worker_id, zone or "none")
    return zone
