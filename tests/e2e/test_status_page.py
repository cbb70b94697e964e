"""The status page in a real headless browser (Debian's Chromium), on the emulators.

One worker with the defaults (KCL 3.x mode: it elects itself leader and assigns itself the leases)
reads a stream of 4 shards with ``--metrics-port``. The browser opens ``/``; the rendered page names
every shard with its lag and its child's state; more records are put and, without the test navigating
again, the page reloads itself and shows the new counts. The screenshot is kept in the test's directory
(docs/images/status-page.png was taken this way).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.browser import Browser, BrowserError, find_chromium
from tests.support.emulators import Backend, free_port
from tests.support.figures import FIGURES
from tests.support.fleet import Fleet
from tests.support.streams import put

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

#: the shard table's cells, as the reader sees them (innerText), one dict per row
ROWS_JS = """
Array.from(document.querySelectorAll('#shards tbody tr')).map(row => {
  const cells = Array.from(row.cells).map(cell => cell.innerText.trim());
  const head = Array.from(document.querySelectorAll('#shards thead th')).map(th => th.innerText.trim());
  return Object.fromEntries(head.map((name, i) => [name, cells[i]]));
})
"""


@pytest.fixture
def chromium() -> str:
    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium installed: scripts/bootstrap.sh installs Debian's chromium")
    return binary


def shard_ids(clients: AwsClients, stream: str) -> list[str]:
    return sorted(s["ShardId"] for s in clients.kinesis.list_shards(StreamName=stream)["Shards"])


def rows(browser: Browser) -> list[dict[str, str]]:
    found: Any = browser.evaluate(ROWS_JS)
    return list(found or [])


def records_shown(browser: Browser) -> int:
    return sum(int(row["records"]) for row in rows(browser))


def test_the_status_page_in_a_headless_browser(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
    chromium: str,
) -> None:
    stream = make_stream(4)
    shards = shard_ids(aws_clients, stream)
    fleet = Fleet(tmp_path, backend, lease_table.table_name, stream)
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    try:
        fleet.start("page-worker", None, "--metrics-port", str(port))
        put(aws_clients, stream, range(40))
        with Browser.launch(tmp_path) as browser:
            fleet.wait(lambda: _opens(browser, url), 30, "the status page answers")

            def all_processing() -> bool:
                shown = rows(browser)
                return sorted(r["shard"] for r in shown) == shards and all(
                    r["state"].startswith("processing") and r["records"] != "0" for r in shown
                )

            started = time.monotonic()
            fleet.wait(settled(all_processing), 90, f"every shard processing on the page\n{browser.text()}")
            to_all_shards = time.monotonic() - started
            text = browser.text()
            assert "page-worker" in text and "3.x leader" in text, text
            for row in rows(browser):
                assert row["lag (ms)"].isdigit(), row  # millisBehindLatest of the last batch
                assert row["child pid"].isdigit(), row
                assert row["restarts"] == "0", row
            assert "leases, last minutes" in text and "page-worker" in text  # the fleet section
            svg_count = browser.evaluate("document.querySelectorAll('svg polyline, svg circle').length")
            assert svg_count >= len(shards), "a lag sparkline per shard"

            # new figures without the test navigating: the page reloads itself
            generated = generated_at(browser)
            before = records_shown(browser)
            put(aws_clients, stream, range(40, 120))
            took = fleet.wait(
                settled(lambda: generated_at(browser) != generated and records_shown(browser) > before),
                30,
                "the page reloaded with new figures",
            )
            assert records_shown(browser) >= 120 or records_shown(browser) > before
            shot = browser.screenshot(tmp_path / "status-page.png")
            assert shot.stat().st_size > 10_000
            size = len(browser.evaluate("document.documentElement.outerHTML"))
        FIGURES[f"status page on {backend.name}"] = (
            f"4 shards on the page {to_all_shards:.1f}s after it first answered; new figures {took:.1f}s "
            f"after more records (reloads every 5 s); page {size / 1024:.1f} KiB; screenshot {shot}"
        )
        assert fleet.daemons["page-worker"].stop() == 0
    finally:
        fleet.close()


def generated_at(browser: Browser) -> str | None:
    found: Any = browser.evaluate("document.getElementById('generated')?.textContent")
    return None if found is None else str(found)


def settled(check: Callable[[], bool]) -> Callable[[], bool]:
    """``check`` on a page that may be half loaded (it reloads itself): not yet, rather than an error."""

    def checked() -> bool:
        try:
            return check()
        except (BrowserError, KeyError, ValueError):
            return False

    return checked


def _opens(browser: Browser, url: str) -> bool:
    """Open ``url``; True once the worker's page (not the 503 "starting" one) is shown."""
    try:
        browser.open(url)
    except AssertionError:
        return False
    return "Shards held" in browser.text()
