"""Where things are in the checkout, for tests and benchmarks alike (never ``Path(__file__).parents[n]``,
which breaks when a test moves)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parents[2]
VENV_BIN: Final = REPO / ".venv" / "bin"
NODE_MODULES: Final = REPO / ".cache" / "node" / "node_modules"
#: the Node scripts of the support package: the emulator preload and wrapper, the h2c proxy
JS: Final = Path(__file__).resolve().parent / "js"
#: test data and the child processes tests run as record processors
FIXTURES: Final = REPO / "tests" / "fixtures"
CHILDREN: Final = FIXTURES / "children"
#: every record it is given into one JSON-lines file ($KCL_TEST_RECORDS), see tests.support.recorder
RECORDER: Final = CHILDREN / "recording_processor.py"
#: fails, hangs or crashes on demand (its first argument), see its header
FAULTY: Final = CHILDREN / "faulty_child.py"
#: a lease table as Java KCL 2.x wrote it (items of ``aws dynamodb scan``)
JAVA_KCL2_TABLE: Final = FIXTURES / "java_kcl2_lease_table.json"
