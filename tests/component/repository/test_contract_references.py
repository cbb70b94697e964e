"""Every section the code cites exists in docs/contract/; no file cites a document outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support.paths import REPO

CONTRACT = REPO / "docs" / "contract"
HEADING = re.compile(r"^#{1,6} (\d+(?:\.\d+)*)\.?\s", re.M)
CITED = re.compile(r"§\s?(\d+(?:\.\d+)*)(?:-(\d+(?:\.\d+)*))?")
#: how the code used to cite material that is not in the repository
OUTSIDE = re.compile(
    r"\b[Ss]pec(?: section)? ?§?\d|\bseeds? ?0\d\d|kcl-spec\.md|shared/reference|reference/seeds"
)
SOURCES = ("kcl_daemon", "protocol", "clients", "samples", "bench", "tests", "scripts", "docs", "README.md")


def numbered_sections() -> set[str]:
    found: set[str] = set()
    for page in CONTRACT.glob("*.md"):
        found.update(HEADING.findall(page.read_text(encoding="utf-8")))
    return found


def tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", *SOURCES], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    keep = {".py", ".md", ".js", ".go", ".sh", ".toml", ".yml", ".properties", ".java"}
    return [REPO / f for f in listed if Path(f).suffix in keep and (REPO / f).is_file()]


def test_the_contract_numbers_its_sections() -> None:
    sections = numbered_sections()
    for chapter in range(1, 11):
        assert str(chapter) in sections, f"docs/contract has no heading numbered {chapter}"
    assert {"3.2", "4.4", "5.1", "6.4", "9.1"} <= sections


def test_every_cited_section_exists() -> None:
    sections = numbered_sections()
    missing = []
    for path in tracked_files():
        if path.is_relative_to(CONTRACT) or path == Path(__file__):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "§" not in line:
                continue
            where = f"{path.relative_to(REPO)}:{number}"
            cites_contract = "contract" in line.lower() or line.lstrip().startswith(("§", "(§"))
            if not cites_contract and "§?" not in line:  # "§?": a pattern that looks for citations
                missing.append(f"{where}: a § reference that does not say it cites the contract")
            for first, last in CITED.findall(line):
                for cited in (first, last):
                    if cited and cited not in sections:
                        missing.append(
                            f"{where}: contract §{cited} has no numbered heading in docs/contract/"
                        )
    assert not missing, "\n".join(missing)


def test_nothing_cites_a_document_outside_the_repository() -> None:
    offenders = []
    for path in tracked_files():
        if path == Path(__file__):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:100]}")
    assert not offenders, "\n".join(offenders)
