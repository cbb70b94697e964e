"""Figures tests measure (takeover times, start-up times, ...), printed at the end of the run by the
``pytest_terminal_summary`` of ``tests/conftest.py``: name -> text. Nothing asserts on them."""

from __future__ import annotations

FIGURES: dict[str, str] = {}
