"""What the recording processor (``tests/fixtures/children/recording_processor.py``) wrote: one JSON line
per event (``initialize``, ``record``, ``shard_ended``, ``shutdown``, ...) with the worker, the shard and,
for records, the data and sequence number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_records(path: Path, event: str | None = None) -> list[dict[str, Any]]:
    """Every line of the records file (none yet: empty), or only those of ``event``.

    A child appends its lines with one ``write``, but a reader may see that write half done: the last
    line counts once its newline is there.
    """
    if not path.exists():
        return []
    text = path.read_text()
    lines = [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line]
    return lines if event is None else [line for line in lines if line["event"] == event]


def data_of(rows: list[dict[str, Any]]) -> set[str]:
    return {row["data"] for row in rows}
