"""The test layout rule: a test's directory and its markers agree (checked at collection by
``tests/conftest.py``), so ``make test-fast`` (tests/unit and tests/component) never needs an emulator,
the CLI end to end, a client toolchain, Spark or a JVM."""

from __future__ import annotations

from collections.abc import Set
from pathlib import PurePath
from typing import Final

#: markers of tests that need more than Python and a few seconds
HEAVY: Final = frozenset({"integration", "e2e", "clients", "spark", "java", "chaos"})
#: layers of the fast loop: none of their tests carries a heavy marker
FAST_LAYERS: Final = ("unit", "component")
#: the marker every test under a directory (relative to tests/) carries
LAYER_MARKER: Final = {"integration": "integration", "e2e": "e2e", "e2e/java": "java"}


def misplaced(path: PurePath, marks: Set[str]) -> list[str]:
    """Why a test in ``path`` (relative to tests/) with ``marks`` is in the wrong layer (empty: it is not)."""
    problems = []
    if path.parts[0] in FAST_LAYERS and marks & HEAVY:
        problems.append(f"marked {sorted(marks & HEAVY)}, which tests/{path.parts[0]} may not be")
    for layer, marker in LAYER_MARKER.items():
        if path.is_relative_to(layer) and marker not in marks:
            problems.append(f"under tests/{layer} without the {marker} marker")
    return problems
