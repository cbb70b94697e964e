"""The import layering of pyproject.toml holds, and a violation of it fails the check."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'protocol'}"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def copy_tree(dest: Path) -> Path:
    shutil.copy(REPO / "pyproject.toml", dest / "pyproject.toml")
    shutil.copytree(REPO / "kcl_daemon", dest / "kcl_daemon", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "protocol", dest / "protocol", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_the_tree_keeps_every_contract(tmp_path: Path) -> None:
    result = lint_imports(copy_tree(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        # an upward import: the pure core reaching for the worker
        (
            "kcl_daemon/core/leases/taker.py",
            "from kcl_daemon.worker import scheduler",
            "points down the layers",
        ),
        # a sideways import between shells of one layer
        ("kcl_daemon/leases/coordinator.py", "from kcl_daemon.shards import sync", "points down the layers"),
        # boto3 outside aws/
        ("kcl_daemon/lifecycle/shard_task.py", "import boto3", "imported in kcl_daemon.aws only"),
        # I/O in the pure core
        ("kcl_daemon/core/sequence.py", "import time", "do no I/O"),
    ],
)
def test_a_violation_fails_the_check(tmp_path: Path, module: str, line: str, contract: str) -> None:
    root = copy_tree(tmp_path)
    target = root / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{line}  # noqa\n", encoding="utf-8")
    result = lint_imports(root)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout and contract in result.stdout, result.stdout
