"""Write tests/support/durations.json, the seconds each test file took, from the JUnit report of a whole run.

    .venv/bin/python scripts/test_durations.py REPORT.xml

``scripts/test.sh`` writes the report (its path is in pytest's "generated xml file" line). The table orders
the files ``make test`` hands to its pytest-xdist workers, longest first (tests/support/schedule.py): run
this again after adding or lengthening a long test. Files under MIN_S seconds are left out (they count as
short), and the seconds are rounded, so the table changes only when a file's time really does.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "tests" / "support" / "durations.json"
#: files shorter than this are not listed: they count as short, in xdist's own order
MIN_S = 3.0


def file_of(classname: str) -> str | None:
    """The path of the test file a JUnit ``classname`` (``tests.e2e.test_x`` or ``tests.e2e.test_x.TestY``)
    belongs to, from the checkout's root; None when no such file exists here."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        candidate = Path(*parts[:end]).with_suffix(".py")
        if (ROOT / candidate).is_file():
            return candidate.as_posix()
    return None


def durations(report: Path) -> dict[str, float]:
    """Seconds per test file (the sum of its tests' times), longest first, the short ones left out."""
    seconds: dict[str, float] = defaultdict(float)
    # the report of our own test run, not untrusted input
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314
        path = file_of(case.get("classname", ""))
        if path is not None:
            seconds[path] += float(case.get("time", "0"))
    kept = {path: round(total) for path, total in seconds.items() if total >= MIN_S}
    return dict(sorted(kept.items(), key=lambda item: (-item[1], item[0])))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write(__doc__.strip() + "\n")
        return 2
    report = Path(argv[0])
    if not report.is_file():
        sys.stderr.write(f"test_durations: {report}: no such JUnit report\n")
        return 2
    table = durations(report)
    if not table:
        sys.stderr.write(f"test_durations: {report} names no test file of this checkout\n")
        return 1
    TABLE.write_text(json.dumps(table, indent=0) + "\n")
    sys.stdout.write(f"{TABLE.relative_to(ROOT)}: {len(table)} files, {sum(table.values()):.0f} s in all\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
