"""The metrics port's /healthz and /readyz (kcl_daemon.metrics.prometheus) over real HTTP, with a fake
HealthSource: status codes, JSON bodies, the start-up answer, a failing check, /metrics still served."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from kcl_daemon.core.worker.health import Check, HealthReport
from kcl_daemon.metrics.prometheus import PrometheusEndpoint, serve
from kcl_daemon.metrics.registry import DaemonMetrics


class FakeHealth:
    def __init__(self) -> None:
        self.live = HealthReport((Check("event-loop", True, "runs callbacks"),))
        self.ready = HealthReport(
            (Check("started", True, "running"), Check("shards", False, "shardId-1 stalled"))
        )

    def liveness(self) -> HealthReport:
        return self.live

    def readiness(self) -> HealthReport:
        return self.ready


@pytest.fixture
def endpoint() -> Iterator[PrometheusEndpoint]:
    served = serve(DaemonMetrics(process_metrics=False), 0)
    yield served
    served.close()


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a local test server
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_before_the_worker_exists_it_is_alive_but_not_ready(endpoint: PrometheusEndpoint) -> None:
    status, kind, body = get(f"{endpoint.base_url}/healthz")
    assert (status, kind) == (200, "application/json")
    assert json.loads(body)["checks"][0]["detail"].startswith("starting")
    status, _, body = get(f"{endpoint.base_url}/readyz")
    assert status == 503 and json.loads(body)["status"] == "fail"


def test_the_worker_answers_with_status_and_reasons(endpoint: PrometheusEndpoint) -> None:
    endpoint.health = FakeHealth()
    status, _, body = get(f"{endpoint.base_url}/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok"
    status, _, body = get(f"{endpoint.base_url}/readyz")
    assert status == 503
    assert json.loads(body)["checks"][1] == {"name": "shards", "ok": False, "detail": "shardId-1 stalled"}


def test_a_check_that_raises_answers_red_instead_of_hanging(endpoint: PrometheusEndpoint) -> None:
    class Broken(FakeHealth):
        def liveness(self) -> HealthReport:
            raise RuntimeError("boom")

    endpoint.health = Broken()
    status, _, body = get(f"{endpoint.base_url}/healthz")
    assert status == 503 and "boom" in json.loads(body)["checks"][0]["detail"]


def test_metrics_are_still_served(endpoint: PrometheusEndpoint) -> None:
    status, _, body = get(endpoint.url)
    assert status == 200 and "kcl_" in body
