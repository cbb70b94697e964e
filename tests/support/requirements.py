"""A test that needs a program or a package the machine lacks: skipped locally, failed under CI (``CI``
set), which must install everything (``scripts/bootstrap.sh``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest


def missing(message: str) -> NoReturn:
    """Skip the test with ``message``, or fail it under CI."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def require_tool(name: str) -> str:
    """Path of a toolchain binary (node, go, jq, ...)."""
    path = shutil.which(name)
    if path is None:
        missing(f"{name} is not installed (scripts/bootstrap.sh installs it)")
    return path


def require_path(path: Path, what: str) -> Path:
    if not path.exists():
        missing(f"{what} is missing at {path} (scripts/bootstrap.sh installs it)")
    return path
