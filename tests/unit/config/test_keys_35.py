"""The KCL 3.5 keys: the layout, the table migration and its bakes, scan segments, the lock's duration
and heartbeat (contract §9.4, §9.5), and what check-config derives from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcl_daemon.config import report
from kcl_daemon.config.settings import Settings, load_settings
from kcl_daemon.errors import ConfigError


def _load(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "app.properties"
    path.write_text("executableName = /bin/true\napplicationName = app\nstreamName = s\n" + text)
    return load_settings(path)


def test_defaults_are_javas_and_a_new_application_is_single_table(tmp_path: Path) -> None:
    settings = _load(tmp_path, "")
    assert settings.lease_table_layout is None  # unset: chosen from the table (core.leader.keep_out)
    assert not settings.migrate_all_entities_to_lease_table
    assert (settings.table_migration_complete_bake_s, settings.table_migration_init_bake_s) == (
        86400.0,
        3600.0,
    )
    assert settings.lease_table_scan_total_segments == 0
    assert (settings.effective_leader_lock_duration_s, settings.effective_leader_lock_heartbeat_s) == (
        10.0,
        2.5,
    )
    derived = report.derived(settings)
    assert "single table" in str(derived["tableLayout"])
    assert derived["leaderLock"] == "10000 ms, heartbeat every 2500 ms"
    compat = "clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X\n"
    two_x = report.derived(_load(tmp_path, compat))
    assert "KCL 3.0-3.4 layout" in str(two_x["tableLayout"]) and "KCL 2.x" in str(two_x["tableLayout"])


def test_the_keys_parse_under_javas_names(tmp_path: Path) -> None:
    settings = _load(
        tmp_path,
        "leaseTableLayout = kcl_3_0_to_3_4\n"
        "migrateAllEntitiesToLeaseTable = true\n"
        "tableMigrationCompleteBakeTimeSeconds = 5\n"
        "tableMigrationInitBakeTimeSeconds = 2\n"
        "leaseTableScanTotalSegments = 8\n"
        "dynamoDbLockBasedLeaderLeaseDurationInMillis = 120000\n"
        "dynamoDbLockBasedLeaderHeartbeatPeriodInMillis = 30000\n",
    )
    assert settings.lease_table_layout == "KCL_3_0_TO_3_4"
    assert settings.migrate_all_entities_to_lease_table
    assert (settings.table_migration_complete_bake_s, settings.table_migration_init_bake_s) == (5.0, 2.0)
    assert settings.lease_table_scan_total_segments == 8
    assert (settings.leader_lock_duration_s, settings.leader_lock_heartbeat_s) == (120.0, 30.0)
    warnings = " ".join(settings.warnings)
    assert "below Java's minimum" in warnings  # the short bake is honoured, with a warning
    assert "set one or the other" in warnings  # the legacy layout and the migration contradict
    assert not any(w.startswith("migrateAllEntitiesToLeaseTable is ignored") for w in settings.warnings)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("dynamoDbLockBasedLeaderHeartbeatPeriodInMillis = 6000\n", "more than half the lock duration"),
        (
            "dynamoDbLockBasedLeaderLeaseDurationInMillis = 4000\n"
            "dynamoDbLockBasedLeaderHeartbeatPeriodInMillis = 2001\n",
            "more than half",
        ),
        ("leaseTableScanTotalSegments = -1\n", "leaseTableScanTotalSegments"),
        ("leaseTableScanTotalSegments = 33\n", "leaseTableScanTotalSegments"),
        ("leaseTableLayout = TWO_TABLES\n", "leaseTableLayout"),
    ],
)
def test_bad_values_are_errors_naming_the_key(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, text)
    assert any(problem in p for p in caught.value.problems), caught.value.problems
