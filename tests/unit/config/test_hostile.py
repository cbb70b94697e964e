"""Hostile configuration: every value ``check-config`` accepts must not crash ``run``; problems are
reported all at once with their line, warnings come with them, and secrets never show (through the CLI:
tests/component/cli/test_hostile_config.py)."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import pytest

from kcl_daemon.config.secrets import MaskingFilter, mask_url_password
from kcl_daemon.config.settings import REQUIRED_FOR_RUN, load_settings
from kcl_daemon.config.validate import executable_warnings
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


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("regionName = us east 1", ":4: regionName 'us east 1' is not an AWS region name (like us-east-1)"),
        ("regionName = US-EAST-1", "is not an AWS region name"),
        ("kinesisEndpoint = http://localhost:70000", "has a port outside 1..65535"),
        ("dynamoDBEndpoint = http://localhost:0", "has a port outside 1..65535"),
        ("tableName = my leases!", ":4: tableName 'my leases!' is not a valid DynamoDB table name"),
        ("tableName = ab", "is not a valid DynamoDB table name"),
        ("streamName = orders/eu", "is not a valid Kinesis stream name"),
        (
            "maxLeaseRenewalThreads = 2147483647",
            "maxLeaseRenewalThreads 2147483647 is above the maximum 1000",
        ),
        ("executableName = /nonexistent/processor --x", "'/nonexistent/processor' does not exist"),
        (
            # 2100-01-01: a fixed value, so that every xdist worker collects the same test ids
            "initialPositionInStreamExtended = 4102444800",
            "initialPositionInStreamExtended",
        ),
    ],
)
def test_values_run_would_crash_on_are_errors(tmp_path: Path, line: str, expected: str) -> None:
    problems, _ = problems_of(write(tmp_path, BASE + line + "\n"))
    assert len(problems) == 1 and expected in problems[0], problems
    if "initialPosition" in line:
        assert "is in the future" in problems[0]


def test_an_executable_that_is_not_executable_or_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative path is resolved from the daemon's working directory
    script = tmp_path / "processor.sh"
    script.write_text("#!/bin/sh\n")
    problems, _ = problems_of(write(tmp_path, BASE + f"executableName = {script}\n"))
    assert f"'{script}' is not executable (chmod +x {script})" in problems[0]
    problems, _ = problems_of(write(tmp_path, BASE + f"executableName = {tmp_path}\n"))
    assert "is a directory, not a program" in problems[0]
    script.chmod(0o755)
    relative = write(tmp_path, BASE + "executableName = ./processor.sh --flag\n")
    assert load_settings(relative, required=REQUIRED_FOR_RUN).executable == ("./processor.sh", "--flag")


def test_a_bare_name_not_on_path_is_a_warning_only() -> None:
    assert executable_warnings(("no-such-processor-xyz", "a"), "app.properties:1") == [
        "app.properties:1: executableName 'no-such-processor-xyz' is not found on PATH now; it is looked up "
        "on PATH again when each child starts"
    ]
    assert executable_warnings(("sh",), "x", path_env=os.environ.get("PATH")) == []


def test_typos_get_a_suggestion(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, BASE + "failoverTimeMilis = 1000\nzzz = 1\n"))
    assert settings.warnings == (
        f"{tmp_path / 'app.properties'}:4: unknown key 'failoverTimeMilis' is ignored - did you mean "
        "'failoverTimeMillis'?",
        f"{tmp_path / 'app.properties'}:5: unknown key 'zzz' is ignored",
    )


def test_duplicate_keys_warn_with_both_lines(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, BASE + "maxRecords = 5\n# x\nmaxRecords = 7\n"))
    assert settings.max_records == 7
    assert settings.warnings == (
        f"{tmp_path / 'app.properties'}:6: maxRecords is set again (also on line 4); the last value wins",
    )
    yaml_path = write(
        tmp_path, "executableName: x\napplicationName: app\nmaxRecords: 5\nmaxRecords: 7\n", name="a.yaml"
    )
    settings = load_settings(yaml_path)
    assert settings.max_records == 7
    assert settings.warnings == (
        f"{yaml_path}:4: maxRecords is set again (also on line 3); the last value wins",
    )


@pytest.mark.parametrize("name", ["app.properties", "app.yaml"])
def test_a_utf8_bom_is_stripped(tmp_path: Path, name: str) -> None:
    text = BASE if name.endswith("properties") else BASE.replace(" = ", ": ")
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    settings = load_settings(path, required=REQUIRED_FOR_RUN)
    assert settings.executable == (sys.executable, "app.py") and settings.warnings == ()


def test_every_malformed_unicode_escape_is_reported(tmp_path: Path) -> None:
    problems, _ = problems_of(write(tmp_path, BASE + "workerId = a\\u12\nstreamName = \\uXYZW and \\u00\n"))
    assert len(problems) == 3, problems
    assert [p.split(": ", 1)[0].rsplit(":", 1)[1] for p in problems] == ["4", "5", "5"]
    assert "malformed \\uxxxx escape: \\u12" in problems[0] and "\\uXYZW" in problems[1]


BILLION_LAUGHS = """\
executableName: x
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (BILLION_LAUGHS, "YAML aliases expand to more than 10000 values; refusing the file"),
        ("executableName: x\nloop: &l [1, *l]\n", ":2: a YAML alias refers to itself"),
    ],
)
def test_yaml_alias_bombs_are_refused(tmp_path: Path, text: str, expected: str) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, text, name="bomb.yaml"))
    assert expected in info.value.problems[0]
    assert time.monotonic() - started < 5


def test_ordinary_yaml_anchors_still_work(tmp_path: Path) -> None:
    text = "defaults: &d {x: 1}\nexecutableName: x\napplicationName: &n app\ntableName: *n\n"
    settings = load_settings(write(tmp_path, text, name="ok.yaml"))
    assert settings.table_name == "app"


SECRET_URL = "http://admin:hunter2@localhost:4566"  # noqa: S105 - a made-up secret to mask


def test_a_password_in_a_url_is_masked_in_every_log_line(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("kcl_daemon.test_masking")
    masking = MaskingFilter()
    # on the logger, so it runs before every handler: pytest's report handler, ahead of caplog's, would
    # format the record first and keep its exception text unmasked
    logger.addFilter(masking)
    try:
        logger.warning("cannot connect to %s: refused", SECRET_URL)
        error = ConnectionError(f"Could not connect to the endpoint URL: {SECRET_URL}/")
        logger.error("call failed", exc_info=(ConnectionError, error, None))
    finally:
        logger.removeFilter(masking)
    assert "hunter2" not in caplog.text and "admin:****@localhost" in caplog.text
    assert (
        mask_url_password("https://u:p@h https://x@h2 http://h3") == "https://u:****@h https://x@h2 http://h3"
    )
