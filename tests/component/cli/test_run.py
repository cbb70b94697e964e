"""The `run` entry points of the CLI: flags, validation before anything starts, help."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kcl_daemon import cli


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "app.properties"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["--properties", "{p}"],
        ["--properties-file", "{p}"],
        ["run", "--properties", "{p}"],
        ["run", "--properties-file", "{p}"],
    ],
)
def test_every_spelling_validates_before_starting_and_lists_all_problems(
    tmp_path: Path, argv: list[str]
) -> None:
    path = write(tmp_path, "executableName = python3 p.py\nmaxRecords = lots\nfailoverTimeMillis = -5\n")
    result = CliRunner().invoke(cli.main, [a.format(p=path) for a in argv])
    assert result.exit_code == 2, result.output
    assert "maxRecords" in result.output and "failoverTimeMillis" in result.output
    assert "applicationName" in result.output and "streamName" in result.output  # missing for run


def test_bare_properties_runs_the_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "executableName = python3 p.py\napplicationName = app\nstreamName = s\n")
    calls: list[tuple[str, bool]] = []

    def fake_run(
        settings: object,
        *,
        local: bool,
        worker_id: str | None,
        status_every_s: float,
        metrics_options: object,
    ) -> int:
        calls.append((settings.stream_name, local))  # type: ignore[attr-defined]
        return 0

    monkeypatch.setattr("kcl_daemon.run.run_from_settings", fake_run)
    result = CliRunner().invoke(cli.main, ["--properties", str(path)])
    assert result.exit_code == 0, result.output
    assert calls == [("s", False)]


def test_properties_before_a_command_is_a_usage_error(tmp_path: Path) -> None:
    path = write(tmp_path, "executableName = x\n")
    result = CliRunner().invoke(cli.main, ["--properties", str(path), "check-config"])
    assert result.exit_code == 2 and "after the command name" in result.output


def test_no_arguments_prints_help_and_exits_2() -> None:
    result = CliRunner().invoke(cli.main, [])
    assert result.exit_code == 2 and "kcl-daemon --properties app.properties" in result.output
