"""The layout rule of tests/conftest.py: a test's directory and its markers agree."""

from __future__ import annotations

from pathlib import PurePath

import pytest

from tests.support.layout import misplaced


@pytest.mark.parametrize(
    ("path", "marks"),
    [
        ("unit/core/taking/test_taker.py", set()),
        ("component/cli/test_run.py", {"asyncio"}),
        ("integration/aws/test_lease_table.py", {"integration"}),
        ("e2e/test_signals.py", {"e2e"}),
        ("e2e/java/test_mixed_fleet.py", {"integration", "e2e", "java"}),
        ("protocol/test_go_client.py", {"clients"}),
    ],
)
def test_tests_in_their_layer_pass(path: str, marks: set[str]) -> None:
    assert misplaced(PurePath(path), marks) == []


@pytest.mark.parametrize(
    ("path", "marks", "problem"),
    [
        ("unit/test_retry.py", {"integration"}, "marked ['integration'], which tests/unit may not be"),
        ("component/cli/test_run.py", {"e2e", "clients"}, "marked ['clients', 'e2e'], which tests/component"),
        (
            "integration/aws/test_lease_table.py",
            set(),
            "under tests/integration without the integration marker",
        ),
        ("e2e/test_signals.py", {"integration"}, "under tests/e2e without the e2e marker"),
        (
            "e2e/java/test_mixed_fleet.py",
            {"integration", "e2e"},
            "under tests/e2e/java without the java marker",
        ),
    ],
)
def test_a_test_in_the_wrong_layer_is_named(path: str, marks: set[str], problem: str) -> None:
    problems = misplaced(PurePath(path), marks)
    assert len(problems) == 1 and problems[0].startswith(problem)
