"""`kcl-daemon doctor` end to end on the emulators: the JSON report and a non-zero exit for a finding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.daemon import run_cli
from tests.support.emulators import REGION, Backend

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def test_the_cli_prints_json_and_exits_non_zero_on_a_finding(
    tmp_path: Path, backend: Backend, lease_table: DynamoLeaseTable
) -> None:
    properties = tmp_path / "app.properties"
    properties.write_text(
        f"applicationName = {lease_table.table_name}\n"
        "streamName = no-such-stream\n"
        f"regionName = {REGION}\n"
        f"kinesisEndpoint = {backend.kinesis_endpoint}\n"
        f"dynamoDBEndpoint = {backend.dynamodb_endpoint}\n"
        "clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1\n"
    )
    done = run_cli("doctor", "--json", "--wait", "0", properties=properties)
    assert done.returncode == 1, done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert body["ok"] is False
    stream = next(check for check in body["checks"] if check["name"] == "stream")
    assert stream["status"] == "problem" and stream["findings"][0]["subject"] == "no-such-stream"
    text = run_cli("doctor", "--wait", "0", properties=properties)
    assert text.returncode == 1 and "what to do:" in text.stdout
