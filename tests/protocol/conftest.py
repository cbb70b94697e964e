"""Fixtures shared by the client transcript tests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NODE_MODULES = REPO / ".cache" / "node" / "node_modules"


def require_tool(name: str) -> str:
    """Path of a toolchain binary. Missing: skip locally, but fail under CI, which must install it."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (scripts/bootstrap.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def require_path(path: Path, what: str) -> Path:
    if not path.exists():
        message = f"{what} is missing at {path} (scripts/bootstrap.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO
