"""Poison records end to end with a processor that hangs on one: kinesalite + dynalite, one daemon, 4
shards, 10,000 records, one poison record, the shards running amazon_kclpy, Node and shell processors at
once; the shell one (the poison record's shard) never answers the batch holding it. The only key the
scenario adds is the timeout that ends the wait (``processRecordsTimeoutInSeconds``: none by default);
each delivery that times out is stopped at once and counted, the record isolated and written to a
directory, every other record processed in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcl_daemon.dead_letters.letter import DeadLetter
from kcl_daemon.dead_letters.sinks import read_file_letters
from tests.support.emulators import Backend
from tests.support.poison import SHARDS, assert_nothing_lost_in_order, record_figures, run_poison_fleet
from tests.support.requirements import require_tool
from tests.support.streams import new_stream

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def test_a_hanging_processor_times_out_and_its_poison_record_goes_to_a_directory(
    tmp_path: Path, kinesalite_endpoint: str, dynalite_endpoint: str
) -> None:
    require_tool("node")
    require_tool("jq")
    backend = Backend("kinesalite+dynalite", kinesalite_endpoint, dynalite_endpoint)
    clients = backend.clients()
    stream = new_stream(clients.kinesis, SHARDS, prefix="poison")
    dead = tmp_path / "dead"

    def letters() -> list[DeadLetter]:
        if not dead.exists():
            return []
        return [item for _, _, item in read_file_letters(dead) if isinstance(item, DeadLetter)]

    run = run_poison_fleet(
        tmp_path, backend, clients, stream, f"file://{dead}", letters, client="shell", kind="hang"
    )
    assert_nothing_lost_in_order(run)
    assert len(run.letters) == 1 and run.letters[0].failure.kind == "timeout"
    assert "processRecords" in run.letters[0].failure.detail, run.letters[0].failure.detail
    record_figures(run, "shell", "hang", "file://")
