"""The suite's Hypothesis profiles, and how many examples a property runs under each (docs/development.md).

* ``kcl-daemon`` (loaded by ``tests/conftest.py``; what ``make test`` and a bare pytest run use): the
  thorough one, Hypothesis's 100 examples for a property that names no count, the count it names with
  :func:`examples` otherwise.
* ``kcl-daemon-fast`` (``make test-fast`` passes ``--hypothesis-profile=kcl-daemon-fast``): the editing
  loop's, a quarter of every count (never fewer than :data:`FLOOR`), so the properties still run every
  strategy on every save and the thorough search stays in ``make test``.

Neither profile has a deadline: on 2 cores shared with emulators and JVMs an example can wait 200 ms for
the CPU, and a property must fail on its property, not on the machine's load (pytest-timeout still ends a
hang). Independent of kcl_daemon.
"""

from __future__ import annotations

from typing import Final

from hypothesis import settings

THOROUGH: Final = "kcl-daemon"
FAST: Final = "kcl-daemon-fast"
#: Hypothesis's own default count, what the thorough profile keeps
THOROUGH_EXAMPLES: Final = 100
#: the share of each count the fast profile runs
FAST_SHARE: Final = 0.25
#: no property runs fewer examples than this, whatever the profile
FLOOR: Final = 10


def register() -> None:
    """Register both profiles and load the thorough one (``--hypothesis-profile`` may then switch)."""
    settings.register_profile(THOROUGH, deadline=None, max_examples=THOROUGH_EXAMPLES)
    settings.register_profile(FAST, deadline=None, max_examples=scaled(THOROUGH_EXAMPLES, FAST_SHARE))
    settings.load_profile(THOROUGH)


def scaled(count: int, share: float) -> int:
    """``count`` examples times ``share``, at least :data:`FLOOR` (and never more than ``count``)."""
    return min(count, max(FLOOR, round(count * share)))


def examples(count: int) -> int:
    """The ``max_examples`` of a property that needs ``count`` in the thorough profile, scaled like the
    loaded profile's default (``@settings(max_examples=examples(300))``); call it at import, which pytest
    does after the profile of the command line is loaded."""
    return scaled(count, settings.default.max_examples / THOROUGH_EXAMPLES)
