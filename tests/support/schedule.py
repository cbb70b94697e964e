"""The order pytest-xdist hands test files to its workers under ``--dist loadfile``: the longest first.

xdist's own loadfile scheduler queues the files by their number of tests, most first, so the long
scenarios (one or two tests each: the Java fleets, the rolling restarts) come out last and run alone at
the end while the other workers idle. :class:`LongestFirstScheduling` keeps everything of loadfile (a file
runs on one worker, a worker asks for the next file when it is almost done) but queues the files by how
long they took in a recorded run, longest first, so the short ones fill in around the long ones.

The expected seconds per file are in ``durations.json`` beside this module, written by
``scripts/test_durations.py`` from a JUnit report of a whole run; a file missing there (a new one, or one
under a few seconds) counts as short and keeps xdist's order among the short ones.

The files that use one of :data:`SHARED_FIXTURES` (session fixtures each worker starts once, slowly: the
SparkSession with its executor JVMs) go out together, as one unit to one worker, which then starts it
once instead of every worker that draws one of those files starting its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

#: seconds per test file (its path from the checkout's root) in a recorded run: scripts/test_durations.py
DURATIONS: Final = Path(__file__).resolve().parent / "durations.json"
#: session fixtures slow to start: the test files naming one run on one worker (see the module docstring)
SHARED_FIXTURES: Final = ("spark_session",)


def load_durations(path: Path = DURATIONS) -> dict[str, float]:
    """The table of expected seconds per file; empty when it is missing or unreadable (the order then is
    xdist's own)."""
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {str(name): float(seconds) for name, seconds in table.items() if isinstance(seconds, int | float)}


def longest_first(scopes: Iterable[str], durations: Mapping[str, float]) -> list[str]:
    """``scopes`` (test files) by expected seconds, longest first; an unknown file counts as 0 s, and files
    of equal expectation keep their given order."""
    return sorted(scopes, key=lambda scope: -durations.get(scope, 0.0))


def shared_fixture(source: str) -> str | None:
    """The first of :data:`SHARED_FIXTURES` a test file's ``source`` asks for (a typed parameter of that
    name, or ``usefixtures``), or None."""
    for name in SHARED_FIXTURES:
        if re.search(rf"\b{name}\s*:|usefixtures\([^)]*[\"']{name}[\"']", source):
            return name
    return None


def make_scheduler(config: Any, log: Any) -> Any:
    """A :class:`LongestFirstScheduling` for ``--dist loadfile``, else None (xdist's own scheduler)."""
    if config.getvalue("dist") != "loadfile":
        return None
    return _scheduler_class()(config, log)


def _scheduler_class() -> type:
    # xdist is imported only where it runs the session: a serial run never needs it
    from xdist.scheduler import LoadFileScheduling

    class LongestFirstScheduling(LoadFileScheduling):  # type: ignore[misc]
        """loadfile with the files of a shared fixture as one unit and the queue ordered by
        :func:`longest_first` before the first unit goes out."""

        def __init__(self, config: Any, log: Any = None) -> None:
            super().__init__(config, log)
            self._durations = load_durations()
            self._root = Path(config.rootpath)
            self._units: dict[str, str] = {}  # test file -> its unit (the file, or a shared fixture's name)
            self._ordered = False

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path not in self._units:
                try:
                    source = (self._root / path).read_text(errors="replace")
                except OSError:
                    source = ""
                self._units[path] = shared_fixture(source) or path
            return self._units[path]

        def _assign_work_unit(self, node: Any) -> None:
            if not self._ordered:
                self._ordered = True
                expected = dict(self._durations)
                for path, unit in self._units.items():
                    if unit != path:
                        expected[unit] = expected.get(unit, 0.0) + self._durations.get(path, 0.0)
                for scope in longest_first(list(self.workqueue), expected):
                    self.workqueue.move_to_end(scope)
            super()._assign_work_unit(node)

    return LongestFirstScheduling
