"""Poison records end to end, to a local directory: kinesalite + dynalite, one daemon, 4 shards, 10,000
records, one poison record. The shards run an unmodified amazon_kclpy processor and processors on the
project's Node and shell clients at once; the poison record's shard runs the parameter's client, which
fails on it as the parameter says (an error its client answers anyway, or a crash)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.dead_letters.letter import DeadLetter
from kcl_daemon.dead_letters.sinks import read_file_letters
from tests.support.emulators import Backend
from tests.support.poison import (
    LETTER_KIND,
    SHARDS,
    assert_nothing_lost_in_order,
    record_figures,
    run_poison_fleet,
)
from tests.support.requirements import require_tool
from tests.support.streams import new_stream

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


@pytest.fixture
def kinesalite(kinesalite_endpoint: str, dynalite_endpoint: str) -> tuple[Backend, AwsClients]:
    require_tool("node")
    require_tool("jq")
    backend = Backend("kinesalite+dynalite", kinesalite_endpoint, dynalite_endpoint)
    return backend, backend.clients()


# amazon_kclpy raising on it: test_poison_records_outage (the same fleet, its destination down a while)
@pytest.mark.parametrize(("client", "kind"), [("shell", "error"), ("node", "crash")])
def test_a_poison_record_goes_to_a_directory_and_the_rest_flows(
    tmp_path: Path, kinesalite: tuple[Backend, AwsClients], client: str, kind: str
) -> None:
    backend, clients = kinesalite
    stream = new_stream(clients.kinesis, SHARDS, prefix="poison")
    dead = tmp_path / "dead" / "letters"  # created by the daemon

    def letters() -> list[DeadLetter]:
        if not dead.exists():
            return []
        return [item for _, _, item in read_file_letters(dead) if isinstance(item, DeadLetter)]

    run = run_poison_fleet(
        tmp_path, backend, clients, stream, f"file://{dead}", letters, client=client, kind=kind
    )
    assert_nothing_lost_in_order(run)
    assert len(run.letters) == 1 and run.letters[0].failure.kind == LETTER_KIND[kind]
    record_figures(run, client, kind, "file://")
