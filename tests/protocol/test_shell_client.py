"""The shell client (clients/shell/kcl.sh, bash + jq): golden transcripts, a >10 MB line, lint, behaviour.

* ``clients/shell/conformance.sh`` replays every transcript and the large batch over pipes;
* ``bash -n`` and ``shellcheck`` check the scripts;
* small processors written in ``tmp_path`` pin the library's promises: handler output never reaches the
  protocol, a failing handler still gets its status, unknown input is ignored, record fields arrive intact,
  checkpoint errors are reported;
* ``samples/shell`` runs once by itself and once under ``kcl-daemon replay``.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import run_cli
from tests.support.paths import REPO
from tests.support.requirements import require_tool
from tests.support.transcripts import Transcript, client_transcripts, large_batch, replay

CLIENT = REPO / "clients" / "shell" / "kcl.sh"
CONFORMANCE = REPO / "clients" / "shell" / "conformance.sh"
SAMPLE_DIR = REPO / "samples" / "shell"
SAMPLE = SAMPLE_DIR / "sample_processor.sh"
SCRIPTS = [CLIENT, CONFORMANCE, SAMPLE]

pytestmark = pytest.mark.clients


def bash() -> str:
    require_tool("jq")
    return require_tool("bash")


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def initialize(shard: str = "shardId-000000000001") -> dict[str, Any]:
    return {
        "action": "initialize",
        "shardId": shard,
        "sequenceNumber": "TRIM_HORIZON",
        "subSequenceNumber": 0,
    }


def record(seq: str, data: bytes | str = b"x", key: str = "pk", sub: int | None = 0) -> dict[str, Any]:
    return {
        "data": b64(data),
        "partitionKey": key,
        "sequenceNumber": seq,
        "approximateArrivalTimestamp": 1700000000123,
        "subSequenceNumber": sub,
        "action": "record",
    }


def process_records(*records: dict[str, Any]) -> dict[str, Any]:
    return {"action": "processRecords", "records": list(records), "millisBehindLatest": 0}


def reply(seq: str | None = None, sub: int | None = None, error: str | None = None) -> dict[str, Any]:
    return {"action": "checkpoint", "sequenceNumber": seq, "subSequenceNumber": sub, "error": error}


def status(action: str) -> dict[str, Any]:
    return {"action": "status", "responseFor": action}


def checkpoint(seq: str | None = None, sub: int | None = None) -> dict[str, Any]:
    return {"action": "checkpoint", "sequenceNumber": seq, "subSequenceNumber": sub}


def converse(
    command: list[str],
    daemon_lines: list[dict[str, Any] | str],
    *,
    cwd: Path = REPO,
    env: dict[str, str] | None = None,
) -> tuple[list[dict[str, Any]], str, int]:
    """Feed every daemon line at once (replies included, in order) and collect what the child wrote.

    The client reads strictly line by line, so pre-written checkpoint replies are consumed exactly when
    it asks for them. Every non-blank stdout line must be a protocol message: nothing else may leak.
    """
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in daemon_lines)
    result = subprocess.run(
        command, input=text.encode(), capture_output=True, cwd=cwd, env=env, timeout=30, check=False
    )
    stdout = result.stdout.decode()
    stderr = result.stderr.decode(errors="replace")
    messages = []
    for line in stdout.split("\n"):
        if line.strip():
            try:
                messages.append(json.loads(line))
            except json.JSONDecodeError:
                pytest.fail(f"non-protocol line on stdout: {line!r}; stderr: {stderr}")
    return messages, stderr, result.returncode


def processor(tmp_path: Path, body: str) -> list[str]:
    """A processor script in ``tmp_path`` that sources the client and runs ``body`` before ``kcl_run``."""
    script = tmp_path / "processor.sh"
    script.write_text(f"set -euo pipefail\nsource {str(CLIENT)!r}\n{body}\nkcl_run\n", encoding="utf-8")
    return [bash(), str(script)]


# ---- golden transcripts ------------------------------------------------------------------------------


@pytest.mark.parametrize("transcript", client_transcripts(), ids=lambda t: t.name)
def test_conformance_processor(transcript: Transcript) -> None:
    replay(transcript, [bash(), str(CONFORMANCE)], cwd=REPO)


def test_conformance_processor_large_batch() -> None:
    replay(large_batch(), [bash(), str(CONFORMANCE)], cwd=REPO)


# ---- lint ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_bash_syntax(script: Path) -> None:
    result = subprocess.run([bash(), "-n", str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_shellcheck() -> None:
    shellcheck = require_tool("shellcheck")
    result = subprocess.run(
        [shellcheck, "-x", *map(str, SCRIPTS)], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


# ---- library behaviour ---------------------------------------------------------------------------------


def test_handler_output_and_input_never_touch_the_protocol(tmp_path: Path) -> None:
    body = r"""
kcl_initialize() {
  echo "hello from initialize"
  printf '{"action":"status","responseFor":"forged"}\n'
  cat   # stdin is /dev/null in handlers: this must not swallow the next message
}
kcl_process_records() {
  echo "hello from processRecords"
  jq -n '{"printed": "by jq"}'
}
"""
    messages, stderr, code = converse(
        processor(tmp_path, body), [initialize(), process_records(record("1")), {"action": "leaseLost"}]
    )
    assert messages == [status("initialize"), status("processRecords"), status("leaseLost")]
    assert "hello from initialize" in stderr
    assert '"responseFor":"forged"' in stderr
    assert "hello from processRecords" in stderr
    assert '"printed": "by jq"' in stderr
    assert code == 0


def test_failing_handler_still_sends_status(tmp_path: Path) -> None:
    body = """
kcl_initialize() { return 3; }
kcl_process_records() { false; }
kcl_lease_lost() { ls /nonexistent-kcl-shell-test; }
"""
    messages, stderr, code = converse(
        processor(tmp_path, body), [initialize(), process_records(record("1")), {"action": "leaseLost"}]
    )
    assert messages == [status("initialize"), status("processRecords"), status("leaseLost")]
    assert "kcl_initialize failed with exit status 3 during initialize" in stderr
    assert "kcl_process_records failed with exit status 1 during processRecords" in stderr
    assert code == 0


def test_unknown_and_malformed_input_is_ignored(tmp_path: Path) -> None:
    body = "kcl_process_records() { :; }"
    lines: list[dict[str, Any] | str] = [
        "",
        "   ",
        "this is not json",
        "[1,2,3]",
        '{"noAction":true}',
        {"action": "bogusAction", "x": 1},
        {"action": "shutdown", "reason": "TERMINATE"},
        reply("1", 0),  # a checkpoint reply nobody asked for
        initialize(),
        {"action": "leaseLost"},
    ]
    messages, stderr, code = converse(processor(tmp_path, body), lines)
    assert messages == [status("initialize"), status("leaseLost")]
    assert "not JSON: this is not json" in stderr
    assert "bogusAction" in stderr
    assert "checkpoint reply that nothing asked for" in stderr
    assert code == 0


def test_record_fields_arrive_intact(tmp_path: Path) -> None:
    out = tmp_path / "fields"
    body = f"""
OUT={str(out)!r}
kcl_process_records() {{
  printf '%s\\0' "$KCL_RECORD_COUNT" "$KCL_MILLIS_BEHIND_LATEST" >> "$OUT"
  while kcl_next_record; do
    local text size
    kcl_record_text text
    kcl_record_size size
    printf '%s\\0' "$KCL_RECORD_INDEX" "$KCL_SEQUENCE_NUMBER" "$KCL_SUB_SEQUENCE_NUMBER" \\
      "$KCL_PARTITION_KEY" "$KCL_ARRIVAL_MILLIS" "$KCL_DATA_BASE64" "$text" "$size" >> "$OUT"
    kcl_record_data > "$OUT.data.$KCL_RECORD_INDEX"
  done
}}
"""
    records = [
        record("49590338271490256608559692538361571095921575989136588898", "hello\n", "été-☃"),
        record("2", bytes(range(256)), "tab\there\nnew line \\ back\\slash \\n literal", sub=None),
        record("3", b"", ""),
        {**record("4", "last"), "approximateArrivalTimestamp": 0},
    ]
    messages, stderr, code = converse(
        processor(tmp_path, body),
        [initialize(), {"action": "processRecords", "records": records, "millisBehindLatest": None}],
    )
    assert messages == [status("initialize"), status("processRecords")], stderr
    fields = [f.decode(errors="surrogateescape") for f in out.read_bytes().split(b"\0")[:-1]]
    assert fields[:2] == ["4", ""]
    rows = [fields[2 + 8 * i : 2 + 8 * (i + 1)] for i in range(4)]
    assert rows[0] == [
        "0",
        records[0]["sequenceNumber"],
        "0",
        "été-☃",
        "1700000000123",
        b64("hello\n"),
        "hello\n",
        "6",
    ]
    assert rows[1][:6] == ["1", "2", "", records[1]["partitionKey"], "1700000000123", b64(bytes(range(256)))]
    # kcl_record_text drops NUL bytes (bash strings cannot hold them) and keeps invalid UTF-8 as is.
    assert rows[1][6].encode(errors="surrogateescape") == bytes(range(1, 256))
    assert rows[1][7] == "256"
    assert rows[2] == ["2", "3", "0", "", "1700000000123", "", "", "0"]
    assert rows[3][4] == "0"
    for index, rec in enumerate(records):
        assert (tmp_path / f"fields.data.{index}").read_bytes() == base64.b64decode(rec["data"])
    assert code == 0


def test_each_record_and_records_json(tmp_path: Path) -> None:
    out = tmp_path / "out"
    body = f"""
OUT={str(out)!r}
note() {{ echo "$1:$KCL_RECORD_INDEX:$KCL_PARTITION_KEY" >> "$OUT"; }}
stop_at_b() {{ note stop; [[ $KCL_PARTITION_KEY != b ]]; }}
kcl_process_records() {{
  kcl_each_record note each
  kcl_each_record stop_at_b || echo "stopped:$?" >> "$OUT"
  kcl_records_json | jq -r '.[].partitionKey' >> "$OUT"
}}
"""
    messages, stderr, code = converse(
        processor(tmp_path, body),
        [process_records(record("1", key="a"), record("2", key="b"), record("3", key="c"))],
    )
    assert messages == [status("processRecords")], stderr
    assert out.read_text().split() == [
        "each:0:a",
        "each:1:b",
        "each:2:c",
        "stop:0:a",
        "stop:1:b",
        "stopped:1",
        "a",
        "b",
        "c",
    ]
    assert code == 0


def test_checkpoint_requests_and_errors(tmp_path: Path) -> None:
    out = tmp_path / "out"
    body = f"""
OUT={str(out)!r}
try() {{
  if kcl_checkpoint "$@"; then echo "ok" >> "$OUT"; else echo "error:$KCL_CHECKPOINT_ERROR" >> "$OUT"; fi
}}
kcl_process_records() {{
  kcl_next_record
  try
  try "$KCL_SEQUENCE_NUMBER"
  try 7 0007
  try 'odd "seq" \\ value'
  try 8 not-a-number
  try 9 1
}}
"""
    lines: list[dict[str, Any] | str] = [
        process_records(record("10")),
        reply(),
        reply("10", None, "ThrottlingException"),
        reply("7", 7, "ShutdownException"),
        reply('odd "seq" \\ value', None, "IllegalArgumentException"),
        {"action": "leaseLost"},  # not a checkpoint reply: dropped, reported as InvalidStateException
    ]
    messages, stderr, code = converse(processor(tmp_path, body), lines)
    assert messages == [
        checkpoint(),
        checkpoint("10"),
        checkpoint("7", 7),
        checkpoint('odd "seq" \\ value'),
        checkpoint("9", 1),
        status("processRecords"),
    ], stderr
    assert out.read_text().split("\n")[:-1] == [
        "ok",
        "error:ThrottlingException",
        "error:ShutdownException",
        "error:IllegalArgumentException",
        "error:IllegalArgumentException",  # sub-sequence "not-a-number": refused locally, nothing sent
        "error:InvalidStateException",
    ]
    assert code == 0


def test_end_of_input_while_waiting_for_a_checkpoint_reply(tmp_path: Path) -> None:
    out = tmp_path / "out"
    body = f"""
kcl_process_records() {{
  kcl_checkpoint || echo "error:$KCL_CHECKPOINT_ERROR" >> {str(out)!r}
}}
"""
    messages, _, code = converse(processor(tmp_path, body), [process_records(record("1"))])
    assert messages == [checkpoint()]  # and no status: nobody is listening any more
    assert out.read_text() == "error:EndOfInput\n"
    assert code == 0


def test_default_shard_end_checkpoints_and_retries_throttling(tmp_path: Path) -> None:
    body = "kcl_process_records() { :; }"
    lines: list[dict[str, Any] | str] = [
        {"action": "shardEnded"},
        reply(error="ThrottlingException"),
        reply(),
    ]
    messages, stderr, code = converse(processor(tmp_path, body), lines)
    assert messages == [checkpoint(), checkpoint(), status("shardEnded")], stderr
    assert code == 0


def test_wait_in_a_handler_does_not_wait_for_the_reader(tmp_path: Path) -> None:
    body = "kcl_process_records() { sleep 0.1 & wait; echo waited; }"
    messages, stderr, code = converse(
        processor(tmp_path, body), [process_records(record("1")), {"action": "leaseLost"}]
    )
    assert messages == [status("processRecords"), status("leaseLost")]
    assert "waited" in stderr
    assert code == 0


def test_missing_process_records_handler_is_an_error(tmp_path: Path) -> None:
    messages, stderr, code = converse(processor(tmp_path, "kcl_initialize() { :; }"), [initialize()])
    assert messages == []
    assert "define a kcl_process_records function" in stderr
    assert code != 0


def test_thousand_record_batch(tmp_path: Path) -> None:
    records = [record(str(1000 + i), b"\xab" * 1000, f"pk-{i}") for i in range(1000)]
    records[-1] = record("1999", "checkpoint", "last")
    messages, stderr, code = converse(
        [bash(), str(CONFORMANCE)],
        [initialize(), process_records(*records), reply("1999", 0)],
    )
    assert messages == [status("initialize"), checkpoint("1999", 0), status("processRecords")], stderr
    assert code == 0


# ---- the sample ----------------------------------------------------------------------------------------


def test_sample_processor_logs_metadata_and_checkpoints(tmp_path: Path) -> None:
    payload = "private payload 42"
    lines: list[dict[str, Any] | str] = [
        initialize("shardId-000000000007"),
        process_records(record("1", payload, "user-1"), record("2", "x", "user-2")),
        reply(error="ThrottlingException"),
        reply(),
        {"action": "shutdownRequested"},
        reply(error="ShutdownException"),
        {"action": "leaseLost"},
    ]
    env = {**os.environ, "CHECKPOINT_RETRY_SECONDS": "0"}
    messages, stderr, code = converse([bash(), SAMPLE.name], lines, cwd=SAMPLE_DIR, env=env)
    assert messages == [
        status("initialize"),
        checkpoint(),
        checkpoint(),
        status("processRecords"),
        checkpoint(),
        status("shutdownRequested"),
        status("leaseLost"),
    ], stderr
    assert "shard=shardId-000000000007 partitionKey=user-1 sequenceNumber=1/0 size=18" in stderr
    assert "partitionKey=user-2 sequenceNumber=2/0 size=1" in stderr
    assert "throttled" in stderr
    assert "ShutdownException" in stderr
    assert payload not in stderr
    assert b64(payload) not in stderr
    assert code == 0


@pytest.mark.e2e
def test_sample_under_kcl_daemon_replay() -> None:
    bash()
    result = run_cli(
        "replay",
        *("--records", str(REPO / "samples" / "records.jsonl")),
        properties="app.properties",
        cwd=SAMPLE_DIR,
        timeout_s=120,
    )
    # Exit 0: every shard ended cleanly at SHARD_END, so the sample checkpointed at shard end.
    assert result.returncode == 0, result.stdout + result.stderr
    records = [json.loads(line) for line in (REPO / "samples" / "records.jsonl").read_text().splitlines()]
    for rec in records:
        assert f"partitionKey={rec['partitionKey']} " in result.stderr
        assert rec.get("text", rec.get("data")) not in result.stderr  # payloads are never logged


def test_initialize_names_the_stream_of_several(tmp_path: Path) -> None:
    out = tmp_path / "stream"
    body = f"""
kcl_initialize() {{ printf '%s|%s\\n' "$KCL_STREAM_NAME" "$KCL_STREAM_IDENTIFIER" >> {str(out)!r}; }}
kcl_process_records() {{ :; }}
"""
    several = {**initialize(), "streamName": "orders", "streamIdentifier": "123456789012:orders:1700000000"}
    messages, stderr, code = converse(processor(tmp_path, body), [several, initialize()])
    assert code == 0, stderr
    assert messages == [status("initialize"), status("initialize")]
    assert out.read_text().splitlines() == ["orders|123456789012:orders:1700000000", "|"]
