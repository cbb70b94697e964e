"""`kcl-daemon replay` end to end, as a processor author runs it: real CLI, real children, real clients."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.support.daemon import run_cli
from tests.support.paths import FAULTY, FIXTURES, NODE_MODULES, REPO

VENV_BIN = Path(sys.executable).parent

pytestmark = pytest.mark.e2e


def run_replay(
    tmp_path: Path,
    properties: str,
    records: list[dict[str, object]],
    *args: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    props = tmp_path / "app.properties"
    props.write_text(properties, encoding="utf-8")
    records_file = tmp_path / "records.jsonl"
    records_file.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return run_cli(
        "replay",
        "--records",
        str(records_file),
        *args,
        properties=props,
        env=env,
        cwd=tmp_path,
        timeout_s=120,
    )


def records(
    count: int, *, checkpoint_every: int = 0, shard: str | None = None, first: int = 1000
) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in range(count):
        text = "checkpoint" if checkpoint_every and (i + 1) % checkpoint_every == 0 else f"record {i}"
        record: dict[str, object] = {
            "text": text,
            "partitionKey": f"pk-{i % 7}",
            "sequenceNumber": str(first + i),
        }
        if shard:
            record["shardId"] = shard
        out.append(record)
    return out


def report(result: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    assert result.stdout, result.stderr[-3000:]
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_unmodified_amazon_kclpy_sample_over_1000_records(tmp_path: Path) -> None:
    sample = VENV_BIN / "sample_kclpy_app.py"
    assert sample.exists(), "amazon_kclpy is installed by scripts/bootstrap.sh"
    result = run_replay(
        tmp_path, f"executableName = {sample}\n", records(1000), "--batch-size", "100", "--json"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (shard,) = report(result)
    assert shard["endedCleanly"] and shard["recordsDelivered"] == 1000 and shard["batches"] == 10
    # the sample checkpoints on its first batch, then (30 s later at the earliest) at shard end
    assert [c["sequenceNumber"] for c in shard["checkpoints"]] == ["1099", "SHARD_END"]  # type: ignore[index]


@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
def test_amazon_kclpy_processors_with_mid_batch_checkpoints_and_errors(tmp_path: Path, version: str) -> None:
    processor = FIXTURES / f"kclpy_conformance_{version}.py"
    result = run_replay(
        tmp_path,
        f"executableName = {sys.executable} {processor}\n",
        records(1000, checkpoint_every=150),
        "--batch-size",
        "100",
        "--fail-checkpoint",
        "ThrottlingException@1",
        "--fail-checkpoint",
        "KinesisClientLibDependencyException@4",
        "--json",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (shard,) = report(result)
    checkpoints = [(c["sequenceNumber"], c["error"]) for c in shard["checkpoints"]]  # type: ignore[index]
    # record 150 is the 2nd in batch 2: a mid-batch checkpoint; the throttled one is retried once
    assert checkpoints[:2] == [("1149", "ThrottlingException"), ("1149", None)]
    assert ("1449", "KinesisClientLibDependencyException") in checkpoints  # not retried: it carries on
    assert checkpoints[-1] == ("SHARD_END", None)
    assert shard["recordsDelivered"] == 1000 and shard["endedCleanly"]


def test_a_shutdown_exception_simulates_a_lost_lease(tmp_path: Path) -> None:
    processor = FIXTURES / "kclpy_conformance_v3.py"
    result = run_replay(
        tmp_path,
        f"executableName = {sys.executable} {processor}\n",
        records(100, checkpoint_every=10),
        "--batch-size",
        "20",
        "--fail-checkpoint",
        "ShutdownException@3",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        "lease lost (simulated by --fail-checkpoint ShutdownException); the child answered leaseLost"
        in result.stdout
    )
    assert "checkpoint 1029  -> ShutdownException" in result.stdout
    assert "processing -> losing-lease" in result.stderr


def test_aws_kcl_processor_over_1000_records(tmp_path: Path) -> None:
    if not (NODE_MODULES / "aws-kcl").exists():
        if os.environ.get("CI"):
            pytest.fail("aws-kcl is missing; scripts/bootstrap.sh installs it")
        pytest.skip("aws-kcl not installed")
    result = run_replay(
        tmp_path,
        f"executableName = node {FIXTURES / 'awskcl_conformance.js'}\n",
        records(1000, checkpoint_every=250),
        "--batch-size",
        "100",
        "--fail-checkpoint",
        "ThrottlingException@2",
        "--json",
        env={"NODE_PATH": str(NODE_MODULES)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (shard,) = report(result)
    checkpoints = [(c["sequenceNumber"], c["error"]) for c in shard["checkpoints"]]  # type: ignore[index]
    assert checkpoints == [
        ("1249", None),
        ("1499", "ThrottlingException"),
        ("1499", None),
        ("1749", None),
        ("1999", None),
        ("SHARD_END", None),
    ]
    assert shard["recordsDelivered"] == 1000


def test_child_killed_mid_batch_is_restarted_and_every_record_arrives(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    shard_a = records(300, shard="shardId-A", first=1000)
    shard_a[150]["text"] = "poison"
    shard_b = records(300, shard="shardId-B", first=5000)
    props = f"executableName = {sys.executable} {FAULTY} crash {state}\nchildRestartBackoffMillis = 10\n"
    result = run_replay(tmp_path, props, shard_a + shard_b, "--batch-size", "40", "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    by_shard = {r["shardId"]: r for r in report(result)}
    assert by_shard["shardId-A"]["childFailures"] == 1 and by_shard["shardId-A"]["childStarts"] == 2
    assert "exited with status 3" in by_shard["shardId-A"]["failures"][0]  # type: ignore[index]
    assert by_shard["shardId-B"]["childFailures"] == 0 and by_shard["shardId-B"]["childStarts"] == 1
    delivered = Counter((state / "delivered.log").read_text().split())
    expected = {f"{1000 + i}/0" for i in range(300)} | {f"{5000 + i}/0" for i in range(300)}
    assert set(delivered) == expected  # every record at least once
    assert all(delivered[f"{5000 + i}/0"] == 1 for i in range(300))  # the other shard: exactly once
    assert "restarting the child" in result.stderr


def test_a_child_that_never_answers_is_stopped_after_its_timeout(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    shard_a = records(50, shard="shardId-A")
    shard_a[20]["text"] = "poison"
    props = (
        f"executableName = {sys.executable} {FAULTY} hang {state}\ntimeoutInSeconds = 1\n"
        "childRestartBackoffMillis = 10\nchildStopTimeoutMillis = 500\n"
    )
    result = run_replay(
        tmp_path, props, shard_a + records(50, shard="shardId-B", first=5000), "--batch-size", "10", "--json"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    by_shard = {r["shardId"]: r for r in report(result)}
    assert "no answer to processRecords within 1s" in by_shard["shardId-A"]["failures"][0]  # type: ignore[index]
    assert by_shard["shardId-B"]["childFailures"] == 0 and by_shard["shardId-B"]["endedCleanly"]


def test_a_child_failing_every_time_is_parked_and_replay_fails(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    data = records(30)
    data[5]["text"] = "poison"
    props = (
        f"executableName = {sys.executable} {FAULTY} crash {state} always\nchildRestartBackoffMillis = 1\n"
        "childMaxConsecutiveFailures = 3\n"
    )
    result = run_replay(tmp_path, props, data, "--batch-size", "10")
    assert result.returncode == 1
    assert "PARKED: the child failed 3 times in a row" in result.stdout
    assert "summary: 1 shard(s), 0 ended cleanly" in result.stdout


def test_bad_records_file_names_the_line(tmp_path: Path) -> None:
    props = "executableName = true\n"
    (tmp_path / "app.properties").write_text(props)
    bad = tmp_path / "records.jsonl"
    bad.write_text('{"text": "ok", "partitionKey": "a"}\n\n{"text": "no key"}\n')
    result = run_cli("replay", "--records", "records.jsonl", properties="app.properties", cwd=tmp_path)
    assert result.returncode == 2
    assert 'records.jsonl:3: "partitionKey" is required' in result.stderr


def test_bad_properties_list_every_problem(tmp_path: Path) -> None:
    result = run_replay(tmp_path, "maxRecords = lots\ntimeoutInSeconds = soon\n", records(1))
    assert result.returncode == 2
    assert "invalid configuration (3 problem(s))" in result.stderr
    assert "app.properties:1: maxRecords 'lots' is not a whole number" in result.stderr
    assert "required key executableName is missing" in result.stderr


def test_missing_executable_is_a_clear_error(tmp_path: Path) -> None:
    result = run_replay(
        tmp_path, "executableName = ./no-such-processor --flag\nchildRestartBackoffMillis = 1\n", records(3)
    )
    assert result.returncode == 2
    assert "executableName './no-such-processor' does not exist" in result.stderr


def test_human_report(tmp_path: Path) -> None:
    sample = REPO / "samples" / "python" / "sample_processor.py"
    data = [dict(r, text=base64.b64encode(b"x").decode()) for r in records(3)]
    result = run_replay(tmp_path, f"executableName = {sys.executable} {sample}\n", data)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "shard shardId-000000000000: ended cleanly at SHARD_END" in result.stdout
    assert "  checkpoint SHARD_END" in result.stdout
    assert "3 record(s) in the file, 3 delivered in 1 batch(es)" in result.stdout
