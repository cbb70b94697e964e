"""`kcl-daemon simulate`: JSON and the HTML plot, settings from a properties file, bad choices refused."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from kcl_daemon.cli import main

POLICIES = ("2.x", "variance", "cooperative")


def test_cli_simulate_json_and_plot(tmp_path: Path) -> None:
    plot = tmp_path / "out.html"
    result = CliRunner().invoke(
        main,
        ["simulate", "--shards", "12", "--workers", "3", "--scenario", "cold", "--json", "--plot", str(plot)],
    )
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.output)
    assert [d["policy"] for d in data] == list(POLICIES)
    assert plot.read_text().startswith("<!doctype html>")


def test_cli_simulate_reads_properties(tmp_path: Path) -> None:
    props = tmp_path / "app.properties"
    props.write_text("failoverTimeMillis = 5000\nrestartGraceMillis = 90000\nmaxHandoffsPerWorker = 3\n")
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            "--shards",
            "12",
            "--workers",
            "3",
            "--scenario",
            "cold",
            "--policy",
            "cooperative",
            "--properties",
            str(props),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "cooperative (grace 90 s)" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scenario", "nope"], "--scenario 'nope': choose from"),
        (["--policy", "nope"], "--policy 'nope': choose from"),
        (["--plot", "x.png"], "only .html"),
    ],
)
def test_cli_simulate_rejects_bad_choices(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["simulate", *args])
    assert result.exit_code == 2
    assert message in result.output
