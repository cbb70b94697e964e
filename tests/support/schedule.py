"""The order pytest-xdist hands test files to its workers under ``--dist loadfile``: the longest first.

xdist's own loadfile scheduler queues the files by their number of tests, most first, so the long
scenarios (one or two tests each: the Java fleets, the rolling restarts) come out last and run alone at
the end while the other workers idle. :class:`LongestFirstScheduling` keeps everything of loadfile (a file
runs on one worker, a worker asks for the next file when it is almost done) but queues the files by how
long they took in a recorded run, longest first, so the short ones fill in around the long ones.

The expected seconds per file are in ``durations.json`` beside this module, written by
``scripts/test_durations.py`` from a JUnit report of a whole run; a file missing there (a new one, or one
under a few seconds) counts as short and keeps xdist's order among the short ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

#: seconds per test file (its path from the checkout's root) in a recorded run: scripts/test_durations.py
DURATIONS: Final = Path(__file__).resolve().parent / "durations.json"


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


def make_scheduler(config: Any, log: Any) -> Any:
    """A :class:`LongestFirstScheduling` for ``--dist loadfile``, else None (xdist's own scheduler)."""
    if config.getvalue("dist") != "loadfile":
        return None
    return _scheduler_class()(config, log)


def _scheduler_class() -> type:
    # xdist is imported only where it runs the session: a serial run never needs it
    from xdist.scheduler import LoadFileScheduling

    class LongestFirstScheduling(LoadFileScheduling):  # type: ignore[misc]
        """loadfile with its queue ordered by :func:`longest_first` before the first file goes out."""

        def __init__(self, config: Any, log: Any = None) -> None:
            super().__init__(config, log)
            self._durations = load_durations()
            self._ordered = False

        def _assign_work_unit(self, node: Any) -> None:
            if not self._ordered:
                self._ordered = True
                for scope in longest_first(list(self.workqueue), self._durations):
                    self.workqueue.move_to_end(scope)
            super()._assign_work_unit(node)

    return LongestFirstScheduling
