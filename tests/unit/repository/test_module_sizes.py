"""Thin entry points and small modules (docs/architecture.md): ``cli.py`` declares the commands and maps
errors, ``run.py`` wires the worker, each at most 400 lines; no module of the daemon is over 600 lines
except the key table, which is one entry per property."""

from __future__ import annotations

from tests.support.paths import REPO

PACKAGE = REPO / "kcl_daemon"
ENTRY_POINTS = {"cli.py": 400, "run.py": 400}
MODULE_LINES = 600
EXEMPT = {"config/keys.py"}


def lines(relative: str) -> int:
    return len(PACKAGE.joinpath(relative).read_text(encoding="utf-8").splitlines())


def test_the_entry_points_stay_thin() -> None:
    over = {name: lines(name) for name, most in ENTRY_POINTS.items() if lines(name) > most}
    assert over == {}, f"over {ENTRY_POINTS}: {over}"


def test_no_module_is_over_600_lines_but_the_key_table() -> None:
    over = {
        str(path.relative_to(PACKAGE)): n
        for path in sorted(PACKAGE.rglob("*.py"))
        if str(path.relative_to(PACKAGE)) not in EXEMPT
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES
    }
    assert over == {}, f"modules over {MODULE_LINES} lines (split them by concern): {over}"
