"""The CI chaos test: 3 daemons, 6 shards, a split and a merge, a SIGKILL and a DynamoDB fault window,
in both lease modes (KCL 3.x leader-based assignment and the 2.x-compatible taker).

kinesalite + dynalite (moto cannot reshard a shard that is being read); the daemons' DynamoDB calls go
through the fault-injecting proxy. 10,000 records; no record may be lost, and every duplicate must
follow a crash or a steal, never the handling of a fault. ``bench/chaos.py`` runs the same longer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.chaos.harness import ChaosConfig, run_chaos

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.chaos]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("lease_mode", ["leader", "taker"])
def test_chaos_loses_nothing_and_duplicates_only_after_crashes_and_steals(
    lease_mode: str,
    kinesalite_endpoint: str,
    dynalite_endpoint: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = ChaosConfig(seed=11, lease_mode=lease_mode)
    report = run_chaos(config, kinesalite_endpoint, dynalite_endpoint, tmp_path)
    with capsys.disabled():
        print("\n" + "\n".join(report.lines()))
    assert report.produced >= 10_000
    assert not report.lost, f"{len(report.lost)} records lost, e.g. {report.lost[:5]}"
    assert report.bad_duplicates == 0, f"duplicates from fault handling: {dict(report.duplicates)}"
    assert report.dropped_while_named == 0, "a lease was given up while the table still named its worker"
    assert report.own_deletions_lost == 0, "a finished lease deleted by its own worker was reported lost"
    assert report.tracebacks == 0
    stopped = {name: code for name, code in report.exit_codes.items() if name not in report.killed}
    assert all(code == 0 for code in stopped.values()), f"SIGTERM must exit 0: {stopped}"
    assert sum(report.faults.values()) > 0 and report.takeover_s
    assert report.wall_s < 180
