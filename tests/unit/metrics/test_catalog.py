"""The metric list of docs/monitoring.md is generated from the catalog."""

from __future__ import annotations

from kcl_daemon.metrics.catalog import markdown_metrics
from tests.support.paths import REPO

MONITORING = (REPO / "docs" / "monitoring.md").read_text(encoding="utf-8")


def test_docs_metric_list_is_generated_from_the_catalog() -> None:
    start = MONITORING.index("<!-- metrics:start -->\n") + len("<!-- metrics:start -->\n")
    end = MONITORING.index("\n<!-- metrics:end -->")
    assert MONITORING[start:end] == markdown_metrics(), "regenerate with markdown_metrics()"
