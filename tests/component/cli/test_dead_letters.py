"""`kcl-daemon dead-letters list|show|replay` on a file:// destination (no AWS): letters written by the
daemon's own sink, the CLI in-process (click's runner, as the other CLI component tests: a subprocess per
command cost two seconds of imports each), the real amazon_kclpy processor as a child for --processor."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from kcl_daemon.cli import main
from kcl_daemon.dead_letters.letter import DeadLetter, Failure
from kcl_daemon.dead_letters.sinks import FileSink
from kcl_protocol import Record
from tests.support.paths import CHILDREN


def run_cli(*args: str) -> Result:
    """``kcl-daemon *args`` in this process: its ``exit_code``, ``stdout`` and ``stderr``."""
    return CliRunner().invoke(main, list(args))


def setup(tmp_path: Path) -> Path:
    sink = FileSink(tmp_path / "dead")
    for shard, seq, data in (
        ("shardId-000000000001", "100", b"not json {"),
        ("shardId-000000000002", "7", b"x"),
    ):
        sink.write(
            DeadLetter.of(
                Record(data, "pk", seq, 0, 1_700_000_000_000),
                shard_id=shard,
                stream=None,
                application="app",
                attempts=9,
                failure=Failure(
                    "exception", "the processor raised", ("Caught exception from action dispatch",)
                ),
            )
        )
    properties = tmp_path / "app.properties"
    properties.write_text(
        f"executableName = {sys.executable} {CHILDREN / 'kclpy_poison.py'} raise {tmp_path / 'out.jsonl'}\n"
        "streamName = orders\n"
        f"deadLetterDestination = file://{tmp_path / 'dead'}\n"
    )
    return properties


def test_list_show_and_dry_run(tmp_path: Path) -> None:
    properties = setup(tmp_path)
    out = run_cli("dead-letters", "list", "--properties", str(properties))
    assert out.exit_code == 0, out.stderr
    assert "shardId-000000000001: 1 dead letter(s)" in out.stdout
    assert (
        "100/0  exception  attempts 9" in out.stdout and "total: 2 dead letter(s) in 2 shard(s)" in out.stdout
    )
    assert "not json" not in out.stdout  # never a payload in a listing
    as_json = json.loads(run_cli("dead-letters", "list", "--properties", str(properties), "--json").stdout)
    assert [x["sequenceNumber"] for x in as_json["deadLetters"]] == ["100", "7"]
    shown = run_cli("dead-letters", "show", "--properties", str(properties), "--sequence", "100")
    letter = DeadLetter.from_line(shown.stdout)
    assert letter.record().data == b"not json {" and letter.failure.stderr
    missing = run_cli("dead-letters", "show", "--properties", str(properties), "--sequence", "999")
    assert missing.exit_code == 1 and "no dead letter matches" in missing.stderr
    dry = run_cli(
        "dead-letters",
        "replay",
        "--properties",
        str(properties),
        "--shard",
        "shardId-000000000002",
        "--dry-run",
    )
    assert dry.exit_code == 0 and dry.stdout.strip() == (
        "would put shardId-000000000002/7/0 (1 bytes, partition key of the original) on orders"
    )


def test_replay_through_the_processor(tmp_path: Path) -> None:
    properties = setup(tmp_path)
    run = run_cli("dead-letters", "replay", "--properties", str(properties), "--processor")
    assert run.exit_code == 0, run.stdout + run.stderr
    processed = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert sorted((p["shard"], p["seq"]) for p in processed if p["event"] == "record") == [
        ("shardId-000000000001", "100"),
        ("shardId-000000000002", "7"),
    ]


def test_no_destination_is_a_clear_error(tmp_path: Path) -> None:
    properties = tmp_path / "app.properties"
    properties.write_text("streamName = orders\n")
    out = run_cli("dead-letters", "list", "--properties", str(properties))
    assert out.exit_code == 2 and "set deadLetterDestination or pass --destination" in out.stderr
