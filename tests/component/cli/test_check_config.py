"""`kcl-daemon check-config`: the effective configuration with sources, warnings, and exit 2 on problems."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kcl_daemon.cli import main
from kcl_daemon.config.keys import KEYS

GOOD = """\
executableName = python3 app.py
applicationName = orders-app
streamArn = arn:aws:kinesis:us-east-1:123456789012:stream/orders
workerIdentifier = host-1
AWSCredentialsProvider = StsAssumeRoleCredentialsProvider|arn:aws:iam::123456789012:role/r|kcl|\
  externalId=s3cr3t
failoverTimeMillis = 20000
idleTimeBetweenReadsInMillis = 100
maxActiveThreads = 8
fanoutConfig.retryBackoffMillis = 5
"""


@pytest.fixture(autouse=True)
def no_aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "AWS_DEFAULT_REGION",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_KINESIS",
        "AWS_ENDPOINT_URL_DYNAMODB",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def write(tmp_path: Path, text: str, name: str = "app.properties") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_text_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_KINESIS", "http://localhost:4567")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    path = write(tmp_path, GOOD)
    code, out, err = run("check-config", "--properties", str(path))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"{path}: valid for run"

    def row(key: str) -> str:
        (found,) = [line for line in lines if line.split()[:1] == [key]]
        return found

    assert row("failoverTimeMillis").split()[1:] == ["20000", f"[{path}:6]"]
    assert row("shardSyncIntervalMillis").split()[1:] == ["60000", "[default]"]
    assert row("idleTimeBetweenReadsInMillis").split()[1] == "200"
    assert row("workerId").endswith(f"[{path}:4 (workerIdentifier)]")
    assert row("kinesisEndpoint").split()[1:] == [
        "http://localhost:4567",
        "[environment",
        "(AWS_ENDPOINT_URL_KINESIS)]",
    ]
    assert row("regionName").split()[1:] == ["eu-west-1", "[environment", "(AWS_DEFAULT_REGION)]"]
    assert "(ignored: children are asyncio tasks" in row("maxActiveThreads")
    assert "s3cr3t" not in out
    assert "externalId=***" in row("AwsCredentialsProvider")
    for key in KEYS:
        row(key.name)
    assert "  streamName: orders (from streamArn)" in lines
    assert "  retrievalMode: POLLING (retrievalMode DEFAULT: a polling key is set)" in lines
    assert any(line.startswith("warning: ") and "raised to 200" in line for line in lines)
    assert any(line.startswith("warning: ") and "fanoutConfig.retryBackoffMillis" in line for line in lines)


def test_json_output(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    code, out, _ = run("check-config", "--properties-file", str(path), "--json")
    assert code == 0
    payload = json.loads(out)
    assert payload["valid"] is True
    assert payload["for"] == "run"
    assert payload["problems"] == []
    keys = {entry["key"]: entry for entry in payload["keys"]}
    assert keys["failoverTimeMillis"] == {
        "key": "failoverTimeMillis",
        "field": "failover_s",
        "value": 20000,
        "source": f"{path}:6",
        "note": None,
    }
    assert keys["executableName"]["value"] == "python3 app.py"
    assert keys["cleanupLeasesUponShardCompletion"]["value"] is True
    assert keys["timeoutInSeconds"]["value"] is None
    assert keys["tableName"]["note"] == "applicationName"
    assert keys["maxActiveThreads"]["field"] is None
    assert keys["initialPositionInStream"]["value"] == "LATEST"
    assert payload["derived"]["leaseTableName"] == "orders-app"
    assert payload["derived"]["leaseAssignmentIntervalMillis"] == 40000
    assert payload["derived"]["credentials.dynamodb"].startswith(
        "assume-role arn:aws:iam::123456789012:role/r"
    )
    assert len(payload["warnings"]) == 2
    assert "s3cr3t" not in out


def test_every_problem_at_once_exits_2(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "maxRecords = lots\nfailoverTimeMillis = 0\ninitialPositionInStream = AT_TIMESTAMP\n"
        "AwsCredentialsProvider = com.example.Mine\nkinesisEndpoint = localhost:4567\n",
    )
    code, out, err = run("check-config", "--properties", str(path))
    assert code == 2
    assert out == ""
    assert "invalid configuration (8 problem(s))" in err
    for text in (
        f"{path}:1: maxRecords 'lots' is not a whole number",
        f"{path}:2: failoverTimeMillis 0 is below the minimum 1",
        f"{path}:3: initialPositionInStream AT_TIMESTAMP needs a timestamp",
        f"{path}:4: AwsCredentialsProvider names an unknown credentials provider 'com.example.Mine'",
        f"{path}:5: kinesisEndpoint 'localhost:4567' is not a URL",
        f"{path}: required key executableName is missing",
        f"{path}: required key applicationName is missing",
        f"{path}: one of streamName or streamArn or streamNames is required",
    ):
        assert f"  - {text}" in err


def test_problems_as_json(tmp_path: Path) -> None:
    path = write(tmp_path, "maxRecords = lots\n")
    code, out, _ = run("check-config", "--properties", str(path), "--json")
    assert code == 2
    payload = json.loads(out)
    assert payload["valid"] is False
    assert len(payload["problems"]) == 4


@pytest.mark.parametrize(
    ("command", "text", "code"),
    [
        ("leases", "tableName = tab\n", 0),
        ("leases", "streamName = s\n", 2),
        ("replay", "executableName = x\n", 0),
        ("run", "executableName = x\n", 2),
    ],
)
def test_for_command(tmp_path: Path, command: str, text: str, code: int) -> None:
    assert run("check-config", "--properties", str(write(tmp_path, text)), "--for", command)[0] == code


def test_yaml(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "executableName: python3 app.py\napplicationName: app\nstreamName: s\nmaxRecords: 100\n",
        name="app.yaml",
    )
    code, out, _ = run("check-config", "--properties", str(path))
    assert code == 0
    assert f"[{path}:4]" in out


def test_missing_file(tmp_path: Path) -> None:
    code, _, err = run("check-config", "--properties", str(tmp_path / "nope.properties"))
    assert code == 2
    assert "cannot read the configuration file" in err
