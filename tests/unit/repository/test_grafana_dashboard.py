"""The Grafana dashboard (deploy/grafana/kcl-daemon.json) against the metrics the daemon exports: every
expression names a metric of the catalog, spelled as Prometheus exposes it (counters ``_total``,
histograms ``_bucket``), groups only by labels that metric has, and every panel asks the dashboard's
data source; the panels the monitoring guide promises are there."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from kcl_daemon.metrics.catalog import BY_NAME, Kind
from tests.support.paths import REPO

DASHBOARD = REPO / "deploy" / "grafana" / "kcl-daemon.json"
#: the labels Prometheus adds to every series, and the histogram bucket label
SCRAPE_LABELS = {"job", "instance", "le"}
METRIC = re.compile(r"\bkcl_[a-z_]+\b")
GROUPING = re.compile(r"\bby \(([^)]*)\)")
SELECTOR_LABELS = re.compile(r"([a-z_]+)\s*=~?")


def panels(container: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in container.get("panels", []):
        yield panel
        yield from panels(panel)


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def expressions(dashboard: dict[str, Any]) -> list[str]:
    found = [t["expr"] for p in panels(dashboard) for t in p.get("targets", [])]
    found += [
        v["query"]["query"] for v in dashboard["templating"]["list"] if isinstance(v.get("query"), dict)
    ]
    return found


def family_of(wire_name: str) -> tuple[str, str]:
    """(the catalog name, the suffix) of a name as Prometheus exposes it."""
    for suffix in ("_total", "_bucket", "_sum", "_count"):
        if wire_name.endswith(suffix) and wire_name[: -len(suffix)] in BY_NAME:
            return wire_name[: -len(suffix)], suffix
    return wire_name, ""


def test_every_expression_names_an_exported_metric_as_prometheus_spells_it(dashboard: dict[str, Any]) -> None:
    exprs = expressions(dashboard)
    assert len(exprs) > 20
    for expr in exprs:
        names = METRIC.findall(expr)
        assert names, f"no kcl_ metric in {expr}"
        for wire in names:
            name, suffix = family_of(wire)
            assert name in BY_NAME, f"{wire} in {expr!r} is not a metric the daemon exports"
            spec = BY_NAME[name]
            expected = {Kind.COUNTER: {"_total"}, Kind.HISTOGRAM: {"_bucket", "_sum", "_count"}}.get(
                spec.kind, {""}
            )
            assert suffix in expected, f"{wire}: a {spec.kind.value} is exposed as {name}{sorted(expected)}"
            allowed = set(spec.labels) | SCRAPE_LABELS
            for group in GROUPING.findall(expr):
                labels = {label.strip() for label in group.split(",") if label.strip()}
                assert labels <= allowed, f"{expr!r} groups by {labels - allowed}, which {name} does not have"
            for label in SELECTOR_LABELS.findall(expr.split("{", 1)[1] if "{" in expr else ""):
                assert label in allowed, f"{expr!r} selects on {label}, which {name} does not have"


def test_every_panel_asks_the_dashboards_data_source(dashboard: dict[str, Any]) -> None:
    names = [v["name"] for v in dashboard["templating"]["list"]]
    assert names == ["datasource", "job", "instance"]
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
            assert 'job=~"$job"' in target["expr"] and 'instance=~"$instance"' in target["expr"], target


def test_the_panels_the_guide_promises(dashboard: dict[str, Any]) -> None:
    used = {family_of(name)[0] for expr in expressions(dashboard) for name in METRIC.findall(expr)}
    promised = {
        "kcl_shard_millis_behind_latest",  # fleet lag
        "kcl_shard_records",  # records/s
        "kcl_fleet_worker_leases",  # leases per worker
        "kcl_fleet_zone_leases",  # and per zone
        "kcl_child_restarts",
        "kcl_lease_renew_seconds",  # renewal latency
        "kcl_checkpoint_seconds",  # checkpoint latency
        "kcl_aws_errors",  # DynamoDB and Kinesis errors
        "kcl_aws_throttles",  # and throttles
    }
    assert promised <= used, promised - used
    ids = [panel["id"] for panel in panels(dashboard)]
    assert len(ids) == len(set(ids))
    assert dashboard["uid"] == "kcl-daemon" and "__inputs" not in dashboard
