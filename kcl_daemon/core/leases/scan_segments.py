"""How many parallel-scan segments a full lease-table scan uses: ``leaseTableScanTotalSegments``
(contract §9.3). Pure.

A configured value above 0 is used as it is. 0 means Java's automatic sizing: one segment per 0.2 GB of
table (``TableSizeBytes`` from DescribeTable, which DynamoDB refreshes about every six hours), at least 1
and at most 32; 10 when the size cannot be read. The shell caches the answer for two hours, as Java does.
"""

from __future__ import annotations

import math
from typing import Final

AUTO: Final = 0
MAX_SEGMENTS: Final = 32
BYTES_PER_SEGMENT: Final = 0.2 * 1024**3
WHEN_UNKNOWN: Final = 10
CACHE_S: Final = 7200.0


def scan_segments(configured: int, table_size_bytes: int | None) -> int:
    """Segments for a scan: ``configured`` if positive, else sized from the table (None: unknown)."""
    if configured < 0:
        raise ValueError(f"leaseTableScanTotalSegments must be 0 (automatic) or positive, not {configured}")
    if configured > AUTO:
        return min(configured, MAX_SEGMENTS)
    if table_size_bytes is None:
        return WHEN_UNKNOWN
    return max(1, min(MAX_SEGMENTS, math.ceil(table_size_bytes / BYTES_PER_SEGMENT)))
