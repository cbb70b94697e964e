"""The Hypothesis profiles of the suite (tests.support.hypothesis_profiles): the fast loop's counts, and
that the thorough profile keeps every count a property names."""

from __future__ import annotations

import pytest
from hypothesis import settings

from tests.support.hypothesis_profiles import FAST, FAST_SHARE, FLOOR, THOROUGH, examples, scaled


@pytest.mark.parametrize(
    ("count", "share", "expected"),
    [
        (300, 1.0, 300),  # the thorough profile: as named
        (300, FAST_SHARE, 75),
        (100, FAST_SHARE, 25),  # the fast profile's own default
        (40, FAST_SHARE, FLOOR),  # never under the floor
        (5, FAST_SHARE, 5),  # nor over the count named
    ],
)
def test_counts_scale_with_the_profile(count: int, share: float, expected: int) -> None:
    assert scaled(count, share) == expected


def test_both_profiles_have_no_deadline_and_examples_follow_the_loaded_one() -> None:
    assert settings.get_profile(THOROUGH).deadline is None and settings.get_profile(FAST).deadline is None
    assert settings.get_profile(FAST).max_examples == scaled(
        settings.get_profile(THOROUGH).max_examples, 0.25
    )
    ratio = settings.default.max_examples / settings.get_profile(THOROUGH).max_examples
    assert examples(300) == scaled(300, ratio)
