"""Hostile configuration through the CLI: `check-config` shows the warnings with the errors, and a password
in an endpoint never shows, in `check-config` or when `leases` cannot read the table."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kcl_daemon.cli import main
from kcl_daemon.config.settings import REQUIRED_FOR_RUN, load_settings
from kcl_daemon.errors import ConfigError

BASE = f"executableName = {sys.executable} app.py\napplicationName = orders-app\nstreamName = orders\n"


def write(tmp_path: Path, text: str, name: str = "app.properties") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    with pytest.raises(ConfigError) as info:
        load_settings(path, required=REQUIRED_FOR_RUN)
    return info.value.problems, info.value.warnings


def test_warnings_are_shown_with_the_errors(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "failoverTimeMilis = 1000\nmaxRecords = lots\n")
    problems, warnings = problems_of(path)
    assert len(problems) == 1 and "maxRecords 'lots' is not a whole number" in problems[0]
    assert len(warnings) == 1 and "did you mean 'failoverTimeMillis'" in warnings[0]
    result = CliRunner().invoke(main, ["check-config", "--properties", str(path)])
    assert result.exit_code == 2
    assert "did you mean 'failoverTimeMillis'" in result.stderr and "maxRecords 'lots'" in result.stderr


SECRET_URL = "http://admin:hunter2@localhost:4566"  # noqa: S105 - a made-up secret to mask


def test_a_password_in_an_endpoint_is_masked_in_check_config(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + f"regionName = us-east-1\nkinesisEndpoint = {SECRET_URL}\n")
    for args in ([], ["--json"]):
        result = CliRunner().invoke(main, ["check-config", "--properties", str(path), *args])
        assert result.exit_code == 0, result.output
        assert "hunter2" not in result.output and "http://admin:****@localhost:4566" in result.output
    bad = write(tmp_path, BASE + "dynamoDBEndpoint = http://admin:hunter2@localhost:99999\n")
    result = CliRunner().invoke(main, ["check-config", "--properties", str(bad)])
    assert result.exit_code == 2 and "hunter2" not in result.stderr and "admin:****@" in result.stderr


def test_a_password_in_an_endpoint_is_masked_when_the_table_cannot_be_read(tmp_path: Path) -> None:
    import socket

    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    path = write(
        tmp_path,
        "applicationName = orders-app\nregionName = us-east-1\n"
        f"dynamoDBEndpoint = http://admin:hunter2@127.0.0.1:{port}\n"
        f"kinesisEndpoint = http://admin:hunter2@127.0.0.1:{port}\n",
    )
    env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_MAX_ATTEMPTS": "1"}
    result = CliRunner(env=env).invoke(main, ["leases", "--properties", str(path)])
    assert result.exit_code == 1, result.output
    assert "hunter2" not in result.output + result.stderr
