"""What the MkDocs build cannot check: the README's links (it is outside docs/), and that the manual cites
the contract, never a numbered "spec"."""

from __future__ import annotations

import re

from tests.support.paths import REPO

ROOT = REPO
#: An inline Markdown link or image: [text](target) or [text](target "title").
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def relative_links(markdown: str) -> list[str]:
    """Link targets outside code blocks and code spans that point into the repository."""
    text = re.sub(r"`[^`\n]*`", "", FENCE.sub("", markdown))
    targets = [match.group(1) for match in LINK.finditer(text)]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def test_relative_links_are_found() -> None:
    sample = (
        '[a](docs/x.md) [b](https://e.org) `[c](no.md)` [d](#top) ![e](img.png "t")\n```\n[f](no.md)\n```'
    )
    assert relative_links(sample) == ["docs/x.md", "img.png"]


def test_every_relative_link_in_the_readme_exists() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = relative_links(readme)
    assert links, "the README links to its docs pages"
    missing = [link for link in links if not (ROOT / link.split("#", 1)[0]).exists()]
    assert missing == []


def test_the_manual_cites_the_contract_not_a_numbered_spec() -> None:
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    cited = [
        f"{page.relative_to(ROOT)}: {match.group(0)}"
        for page in pages
        for match in re.finditer(r"\bspec\s*§?\s*\d+(?:\.\d+)*", page.read_text("utf-8"), re.I)
    ]
    assert cited == [], "write 'contract §N.M' and link the contract page that holds the section"
