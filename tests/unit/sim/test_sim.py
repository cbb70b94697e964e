"""The fleet simulator at small scale: policy ordering (not absolute numbers) and determinism; its CLI is
tested in tests/component/cli/test_simulate.py."""

from __future__ import annotations

import pytest

from kcl_daemon.sim.model import FleetConfig, Result
from kcl_daemon.sim.policies import by_name
from kcl_daemon.sim.report import compare, html_page, table, to_json
from kcl_daemon.sim.scenarios import Size

SMALL = Size(50, 10, 2)
POLICIES = ("2.x", "variance", "cooperative")


def run(scenario: str, fleet: FleetConfig | None = None, size: Size = SMALL) -> dict[str, Result]:
    return {r.policy.split(" ")[0]: r for r in compare([scenario], POLICIES, size, fleet or FleetConfig())}


def test_scale_out_cooperative_ends_even_per_cluster_with_the_fewest_moves() -> None:
    r = run("scale-out")
    ours = r["cooperative"]
    assert ours.zone_leases == {"c1": 25, "c2": 25}
    assert ours.max_leases - ours.min_leases <= 1
    assert ours.moves == ours.moves_lower_bound
    assert ours.moves <= min(r["2.x"].moves, r["variance"].moves)
    assert ours.duplicate_risk_moves == 0 < r["2.x"].duplicate_risk_moves
    assert ours.time_to_balance_s is not None


def test_rolling_restart_with_grace_moves_nothing_and_without_grace_duplicates_nothing() -> None:
    with_grace = run("rolling", FleetConfig(restart_grace_s=120.0))["cooperative"]
    assert (with_grace.moves, with_grace.duplicate_risk_moves) == (0, 0)
    without = run("rolling")
    assert without["cooperative"].duplicate_risk_moves == 0 < without["2.x"].duplicate_risk_moves


def test_zone_loss_spreads_evenly_with_the_fewest_moves() -> None:
    r = run("zone-loss")
    ours = r["cooperative"]
    assert ours.max_leases - ours.min_leases <= 1
    assert ours.moves == ours.moves_lower_bound <= min(r["2.x"].moves, r["variance"].moves)


def test_cold_start_and_reshard_ours_is_never_more_skewed() -> None:
    for scenario in ("cold", "reshard"):
        r = run(scenario)
        skew = {p: x.max_leases - x.min_leases for p, x in r.items()}
        assert skew["cooperative"] <= min(skew.values()), scenario
        assert r["cooperative"].moves <= min(x.moves for x in r.values()), scenario


def test_same_seed_same_result() -> None:
    first = to_json(compare(["crash"], POLICIES, SMALL, FleetConfig(), seed=3))
    again = to_json(compare(["crash"], POLICIES, SMALL, FleetConfig(), seed=3))
    strip = [{k: v for k, v in r.items() if not k.startswith("decider")} for r in first]
    assert strip == [{k: v for k, v in r.items() if not k.startswith("decider")} for r in again]


def test_table_and_html() -> None:
    results = compare(["cold"], POLICIES, Size(12, 3, 2), FleetConfig())
    text = table(results)
    assert text.splitlines()[0].startswith("scenario") and len(text.splitlines()) == 4
    assert table(results, markdown=True).startswith("| scenario |")
    page = html_page(results)
    assert page.count("<svg") == 3 and "polyline" in page


def test_the_fleet_runs_on_the_workers_lease_timings() -> None:
    """The simulator's periods are the worker's (core.leases.timings): kcl-daemon discovers its leases
    no slower than its expiry passes (1 s at the defaults), Java every interval/2 - 25 ms."""
    fleet = FleetConfig()
    assert fleet.renew_period_s == fleet.timings.renew_every_s == 10.0 / 3 - 0.025
    assert fleet.taker_period_s == 20.05
    assert fleet.discovery_period_s == 1.0
    assert fleet.java_discovery_period_s == 9.975
    assert by_name("cooperative").daemon_discovery
    assert not by_name("variance").daemon_discovery


@pytest.mark.parametrize("policy", ["2.x", "cooperative"])
def test_per_worker_renewal_writes_a_heartbeat_per_worker_and_takes_over_as_fast(policy: str) -> None:
    """Under the 2.x taker and this project's 3.x leader alike (which reads the heartbeats)."""
    per_lease = compare(["crash"], (policy,), SMALL, FleetConfig())[0]
    per_worker = compare(["crash"], (policy,), SMALL, FleetConfig(lease_renewal="PER_WORKER"))[0]
    # 50 leases over 10 workers: a tenth of the renewal writes, before takes and moves
    assert per_worker.ddb_write_units_per_lease_hour < 0.25 * per_lease.ddb_write_units_per_lease_hour
    # the 2.x takers' heartbeat reads between their full runs (the sim's takers scan at full runs only;
    # under the leader it counts no heartbeat reads)
    assert per_lease.ddb_read_units_per_lease_hour <= per_worker.ddb_read_units_per_lease_hour
    # a crashed worker's leases are served again as soon (its heartbeat stands still as its counters did)
    assert per_worker.unserved_lease_s <= per_lease.unserved_lease_s * 1.1 + 1
    assert per_worker.max_leases - per_worker.min_leases <= per_lease.max_leases - per_lease.min_leases + 1
