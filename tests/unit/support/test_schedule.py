"""The hand-out order of ``make test`` (tests.support.schedule) and its table (scripts/test_durations.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from tests.support.paths import REPO
from tests.support.schedule import DURATIONS, load_durations, longest_first


def _durations_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "test_durations_script", REPO / "scripts" / "test_durations.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_longest_first_and_unknown_files_keep_their_order_as_short() -> None:
    scopes = ["a.py", "b.py", "long.py", "c.py", "mid.py"]
    table = {"long.py": 200.0, "mid.py": 40.0, "c.py": 0.0}
    assert longest_first(scopes, table) == ["long.py", "mid.py", "a.py", "b.py", "c.py"]


def test_a_missing_or_broken_table_is_empty(tmp_path: Path) -> None:
    assert load_durations(tmp_path / "absent.json") == {}
    (tmp_path / "broken.json").write_text("{not json")
    assert load_durations(tmp_path / "broken.json") == {}
    (tmp_path / "list.json").write_text("[1, 2]")
    assert load_durations(tmp_path / "list.json") == {}


def test_every_file_of_the_table_exists() -> None:
    table = load_durations(DURATIONS)
    assert table, f"{DURATIONS} is empty or missing"
    gone = [name for name in table if not (REPO / name).is_file()]
    assert gone == [], (
        f"{gone} are in {DURATIONS.relative_to(REPO)} but not in the checkout: rename them there, or "
        "regenerate it with `.venv/bin/python scripts/test_durations.py REPORT.xml` from a whole run's report"
    )


def test_the_script_sums_each_files_tests_from_a_junit_report(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.unit.support.test_schedule" name="a" time="2.5" />'
        '<testcase classname="tests.unit.support.test_schedule" name="b" time="1.0" />'
        '<testcase classname="tests.unit.support.test_layout" name="c" time="0.1" />'
        '<testcase classname="tests.e2e.test_gone" name="d" time="90" />'
        "</testsuite></testsuites>"
    )
    script = _durations_script()
    assert script.file_of("tests.unit.support.test_schedule.TestX") == "tests/unit/support/test_schedule.py"
    assert script.durations(report) == {"tests/unit/support/test_schedule.py": 4}
