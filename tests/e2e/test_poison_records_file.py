"""Poison records end to end, to a local directory: kinesalite + dynalite, one daemon, 4 shards, 10,000
records, one poison record, an unmodified amazon_kclpy processor (or one on the project's Node client) that
raises (or exits) on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.dead_letters.letter import DeadLetter
from kcl_daemon.dead_letters.sinks import read_file_letters
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.paths import CHILDREN
from tests.support.poison import SHARDS, assert_nothing_lost_in_order, run_poison_fleet
from tests.support.requirements import require_tool
from tests.support.streams import new_stream

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


@pytest.fixture
def kinesalite(kinesalite_endpoint: str, dynalite_endpoint: str) -> tuple[Backend, AwsClients]:
    backend = Backend("kinesalite+dynalite", kinesalite_endpoint, dynalite_endpoint)
    return backend, backend.clients()


@pytest.mark.parametrize(
    ("client", "mode"), [("kclpy", "raise"), ("kclpy", "exit"), ("node", "throw"), ("node", "exit")]
)
def test_a_poison_record_goes_to_a_directory_and_the_rest_flows(
    tmp_path: Path, kinesalite: tuple[Backend, AwsClients], client: str, mode: str
) -> None:
    backend, clients = kinesalite
    stream = new_stream(clients.kinesis, SHARDS, prefix="poison")
    dead = tmp_path / "dead" / "letters"  # created by the daemon

    def letters() -> list[DeadLetter]:
        if not dead.exists():
            return []
        return [item for _, _, item in read_file_letters(dead) if isinstance(item, DeadLetter)]

    child = None if client == "kclpy" else f"{require_tool('node')} {CHILDREN / 'poison_processor.js'}"
    run = run_poison_fleet(
        tmp_path, backend, clients, stream, f"file://{dead}", letters, mode=mode, child=child
    )
    assert_nothing_lost_in_order(run)
    assert len(run.letters) == 1
    FIGURES[f"poison record ({client} {mode}, file://): first failure -> shard moves on"] = (
        f"{run.moved_on_s:.1f} s; {run.redelivered} records re-delivered by the retries and the bisection; "
        f"{len(run.poison_events)} deliveries failed on the poison record"
    )
