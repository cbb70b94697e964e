"""leaseTableScanTotalSegments: as configured, or Java's automatic sizing (contract §9.3)."""

from __future__ import annotations

import pytest

from kcl_daemon.core.leases.scan_segments import scan_segments

GB = 1024**3


@pytest.mark.parametrize(
    ("configured", "size", "segments"),
    [
        (4, None, 4),
        (4, 100 * GB, 4),  # configured wins
        (64, None, 32),
        (0, None, 10),  # DescribeTable failed
        (0, 0, 1),
        (0, int(0.2 * GB), 1),
        (0, int(0.2 * GB) + 1, 2),
        (0, 3 * GB, 15),
        (0, 100 * GB, 32),
    ],
)
def test_segments(configured: int, size: int | None, segments: int) -> None:
    assert scan_segments(configured, size) == segments


def test_negative_is_refused() -> None:
    with pytest.raises(ValueError, match="leaseTableScanTotalSegments"):
        scan_segments(-1, None)
