"""The status page's routes on the metrics port (kcl_daemon.metrics.prometheus) over real HTTP, with a fake
StatusSource: ``/`` and ``/status.json``, the start-up answer, HEAD and other methods, a failing source,
every other path answered as before, and the page behind a reverse proxy that serves it under a prefix."""

from __future__ import annotations

import html.parser
import http.server
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from kcl_daemon.core.worker.health import Check, HealthReport
from kcl_daemon.core.worker.status import FleetView, ShardView, StatusSnapshot, WorkerView
from kcl_daemon.metrics.prometheus import PrometheusEndpoint, serve
from kcl_daemon.metrics.registry import DaemonMetrics

PREFIX = "/kcl/worker-a/"


class FakeStatus:
    def __init__(self) -> None:
        self.calls = 0

    def snapshot(self) -> StatusSnapshot:
        self.calls += 1
        report = HealthReport((Check("started", True, "running"),))
        return StatusSnapshot(
            worker=WorkerView("worker-a", None, "2.x taker", None, None, "running", 5.0, 1, report, report),
            shards=(ShardView("shardId-000000000007", "shardId-000000000007", "processing", 0),),
            fleet=FleetView(scanned_age_s=None),
            generated_at=1_800_000_000.0,
        )


@pytest.fixture
def endpoint() -> Iterator[PrometheusEndpoint]:
    served = serve(DaemonMetrics(process_metrics=False), 0)
    yield served
    served.close()


def request(
    url: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, method=method, headers=headers or {})  # noqa: S310 - a local server
    try:
        with urllib.request.urlopen(req, timeout=5) as response:  # noqa: S310
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_before_the_worker_exists_the_page_says_it_is_starting(endpoint: PrometheusEndpoint) -> None:
    status, headers, body = request(f"{endpoint.base_url}/")
    assert status == 503 and headers["Content-Type"].startswith("text/html") and b"starting" in body
    status, headers, body = request(f"{endpoint.base_url}/status.json")
    assert (status, headers["Content-Type"], json.loads(body)) == (
        503,
        "application/json",
        {"status": "starting"},
    )


def test_the_page_and_its_json(endpoint: PrometheusEndpoint) -> None:
    source = endpoint.status = FakeStatus()
    status, headers, body = request(f"{endpoint.base_url}/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert b"shardId-000000000007" in body
    assert headers["Cache-Control"] == "no-store"
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    status, headers, body = request(f"{endpoint.base_url}/status.json")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body)["shards"][0]["shardId"] == "shardId-000000000007"
    assert source.calls == 2  # built per request, never in between


def test_head_answers_without_a_body_and_other_methods_are_refused(endpoint: PrometheusEndpoint) -> None:
    endpoint.status = FakeStatus()
    status, headers, body = request(f"{endpoint.base_url}/", "HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
    status, headers, _ = request(f"{endpoint.base_url}/status.json", "POST")
    assert status == 405 and headers["Allow"] == "GET, HEAD"


def test_a_source_that_raises_answers_500_instead_of_hanging(endpoint: PrometheusEndpoint) -> None:
    class Broken(FakeStatus):
        def snapshot(self) -> StatusSnapshot:
            raise RuntimeError("boom")

    endpoint.status = Broken()
    status, _, body = request(f"{endpoint.base_url}/")
    assert status == 500 and b"boom" not in body


def test_every_other_path_answers_as_before(endpoint: PrometheusEndpoint) -> None:
    endpoint.status = FakeStatus()
    for path in ("/metrics", "/anything/else", "/status"):  # prometheus_client serves any other path
        status, headers, body = request(f"{endpoint.base_url}{path}")
        assert status == 200 and headers["Content-Type"].startswith("text/plain") and b"kcl_" in body
    assert request(f"{endpoint.base_url}/favicon.ico")[:1] == (200,)
    # a Prometheus scraper pointed at / keeps its metrics; browsers and curl get the page
    scrape = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    status, headers, body = request(f"{endpoint.base_url}/", headers={"Accept": scrape})
    assert status == 200 and b"kcl_" in body and b"<html" not in body
    for accept in ("*/*", "text/html,application/xhtml+xml,*/*;q=0.8", "text/html, text/plain, */*"):
        status, headers, body = request(f"{endpoint.base_url}/", headers={"Accept": accept})
        assert status == 200 and headers["Content-Type"].startswith("text/html"), accept
    assert request(f"{endpoint.base_url}/healthz")[0] == 200


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links += [str(value) for name, value in attrs if name in ("href", "src") and value]


@pytest.fixture
def proxy(endpoint: PrometheusEndpoint) -> Iterator[str]:
    """A reverse proxy serving the metrics port under PREFIX (the prefix stripped), 404 elsewhere."""
    upstream = endpoint.base_url

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if not self.path.startswith(PREFIX):
                self.send_error(404)
                return
            status, headers, body = request(upstream + "/" + self.path[len(PREFIX) :])
            self.send_response(status)
            self.send_header("Content-Type", headers.get("Content-Type", "text/plain"))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_behind_a_path_prefix_every_link_stays_under_it(endpoint: PrometheusEndpoint, proxy: str) -> None:
    endpoint.status = FakeStatus()
    page_url = proxy + PREFIX
    status, _, body = request(page_url)
    assert status == 200 and b"shardId-000000000007" in body
    parser = _Links()
    parser.feed(body.decode())
    assert parser.links, "the page links to its JSON, the metrics and the probes"
    for link in parser.links:
        target = urllib.parse.urljoin(page_url, link)
        assert urllib.parse.urlsplit(target).path.startswith(PREFIX), link
        assert request(target)[0] in (200, 503), target  # /readyz: 503 before a worker is attached
        assert request(f"{proxy}/{link}")[0] == 404  # the proxy serves nothing outside its prefix
