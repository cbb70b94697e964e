"""The `kcl-daemon simulate` command: its options, the fleet it simulates, and what it prints."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click
import orjson

from kcl_daemon.command_line import load_for, properties_option, refuse


@click.command()
@click.option("--shards", default=500, show_default=True, type=click.IntRange(min=1), help="Shards (leases).")
@click.option("--workers", default=200, show_default=True, type=click.IntRange(min=1), help="Workers.")
@click.option(
    "--zones", default=2, show_default=True, type=click.IntRange(min=1), help="Zones (or clusters)."
)
@click.option(
    "--scenario",
    "scenarios",
    multiple=True,
    help="Scenario (repeatable; default: all but scale): "
    "cold, scale-out, crash, leader-crash, rolling, hot, zone-loss, reshard, scale.",
)
@click.option(
    "--policy",
    "policies",
    multiple=True,
    help="Policy (repeatable; default: 2.x, variance, cooperative): also count (Java's LEASE_COUNT_BASED) "
    "and variance-1814 (Java's variance decider with KCL #1814's fixed-width threshold).",
)
@properties_option(
    "Take failoverTimeMillis, maxLeasesForWorker, leaseAssignmentIntervalMillis, restartGraceMillis and "
    "maxHandoffsPerWorker from this file.",
    required=False,
)
@click.option("--failover-ms", type=click.IntRange(min=100), help="failoverTimeMillis (overrides the file).")
@click.option("--grace-ms", type=click.IntRange(min=0), help="restartGraceMillis (overrides the file).")
@click.option("--max-handoffs", type=click.IntRange(min=1), help="maxHandoffsPerWorker (overrides the file).")
@click.option("--seed", default=0, show_default=True, type=int, help="Random seed (same seed, same result).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option(
    "--plot", type=click.Path(path_type=Path, dir_okay=False), help="Write a timeline picture (.html)."
)
def simulate(
    shards: int,
    workers: int,
    zones: int,
    scenarios: tuple[str, ...],
    policies: tuple[str, ...],
    properties: Path | None,
    failover_ms: int | None,
    grace_ms: int | None,
    max_handoffs: int | None,
    seed: int,
    as_json: bool,
    plot: Path | None,
) -> None:
    """Compare lease-balancing policies on a simulated fleet (capacity planning; no AWS).

    Every policy runs the real decision code (the 2.x taker, Java's variance-based decider, this
    project's assignor) through the same seeded scenario; the table shows time to balance, lease moves
    against their lower bound, hand-offs, moves that risk duplicates, unserved lease-seconds, leases per
    worker and per zone, DynamoDB units per lease-hour and the decider's time per round.
    """
    from kcl_daemon.sim import report as sim_report
    from kcl_daemon.sim.model import FleetConfig
    from kcl_daemon.sim.policies import MORE_POLICY_NAMES, POLICY_NAMES
    from kcl_daemon.sim.scenarios import SCENARIOS, Size

    if plot is not None and plot.suffix.lower() != ".html":
        refuse(f"--plot {plot}: only .html pictures are supported")
    for name in scenarios:
        if name not in SCENARIOS:
            refuse(f"--scenario {name!r}: choose from {', '.join(SCENARIOS)}")
    for name in policies:
        if name not in (*POLICY_NAMES, *MORE_POLICY_NAMES):
            refuse(f"--policy {name!r}: choose from {', '.join((*POLICY_NAMES, *MORE_POLICY_NAMES))}")
    fleet = FleetConfig()
    if properties is not None:
        settings = load_for(properties, ())
        leases, leader = settings.leases(), settings.leader()
        fleet = FleetConfig(
            failover_s=leases.failover_s,
            assignment_interval_s=leases.assignment_interval_s,
            max_leases_for_worker=leases.max_leases_for_worker,
            restart_grace_s=leader.restart_grace_s,
            max_handoffs_per_worker=leader.max_handoffs_per_worker,
        )
    if failover_ms is not None:
        fleet = dataclasses.replace(fleet, failover_s=failover_ms / 1000)
    if grace_ms is not None:
        fleet = sim_report.with_grace(fleet, grace_ms / 1000)
    if max_handoffs is not None:
        fleet = dataclasses.replace(fleet, max_handoffs_per_worker=max_handoffs)
    chosen = scenarios or tuple(name for name in SCENARIOS if name != "scale")
    results = sim_report.compare(chosen, policies or POLICY_NAMES, Size(shards, workers, zones), fleet, seed)
    if plot is not None:
        plot.write_text(sim_report.html_page(results), encoding="utf-8")
    if as_json:
        click.echo(orjson.dumps(sim_report.to_json(results), option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(sim_report.table(results))
