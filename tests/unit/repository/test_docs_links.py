"""What the MkDocs build cannot check: the README's links (it is outside docs/), that the manual cites
the contract, never a numbered "spec", that every repository path and ``kcl_daemon`` module it names
exists, and that building it writes nowhere git tracks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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


#: Where the manual may point into the repository: a path under one of these folders.
REPOSITORY_FOLDERS = (
    "kcl_daemon",
    "protocol",
    "clients",
    "samples",
    "tests",
    "scripts",
    "deploy",
    "bench",
    "docs",
)
#: A repository path as the manual writes it (not inside a URL or a longer path); ``<...>`` and ``*`` are
#: placeholders, so a path running into one is left out.
REPO_PATH = re.compile(rf"(?<![\w/.-])((?:{'|'.join(REPOSITORY_FOLDERS)})/[\w./-]*[\w/])(?![<*{{\w])")
#: A dotted name in kcl_daemon: a module, or a name defined at the top of one.
DOTTED = re.compile(r"(?<![\w.])kcl_daemon(?:\.\w+)+")
MANUAL = [
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "contract").glob("*.md")),
    ROOT / "README.md",
]


def defines(module: Path, name: str) -> bool:
    source = module.read_text(encoding="utf-8")
    return re.search(rf"^(?:async def|def|class) {name}\b|^{name}\s*[:=]", source, re.MULTILINE) is not None


def dotted_exists(dotted: str) -> bool:
    """``kcl_daemon.a.b``: a package or module, or ``Name`` (one level) defined in the module before it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        rest = parts[cut:]
        if base.is_dir() and (base / "__init__.py").exists():
            return not rest or (len(rest) == 1 and defines(base / "__init__.py", rest[0]))
        if base.with_suffix(".py").is_file():
            return not rest or (len(rest) == 1 and defines(base.with_suffix(".py"), rest[0]))
    return False


def test_repository_paths_and_module_names_are_found() -> None:
    text = (
        "see `kcl_daemon/core/leases/taker.py`, kcl_daemon/<name>/, https://x.org/tests/a.py and docs/x.md."
    )
    assert REPO_PATH.findall(text) == ["kcl_daemon/core/leases/taker.py", "docs/x.md"]
    assert dotted_exists("kcl_daemon.config.keys.markdown_table")
    assert dotted_exists("kcl_daemon.core.leases")
    assert not dotted_exists("kcl_daemon.config.keys.no_such_name")
    assert not dotted_exists("kcl_daemon.consumer")


@pytest.mark.parametrize("page", MANUAL, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_repository_path_and_module_the_manual_names_exists(page: Path) -> None:
    """A module moved or renamed leaves no `kcl_daemon/...` path or `kcl_daemon.x` name behind in the docs."""
    text = page.read_text(encoding="utf-8")
    missing = sorted({path for path in REPO_PATH.findall(text) if not (ROOT / path.rstrip("/")).exists()})
    missing += sorted({name for name in DOTTED.findall(text) if not dotted_exists(name)})
    assert not missing, f"{page.relative_to(ROOT)} names what is not in the tree: " + ", ".join(missing)


def test_the_docs_build_writes_nowhere_git_tracks() -> None:
    """`mkdocs build` as the README gives it writes to mkdocs.yml's site_dir, which git ignores; every
    scripted build passes --site-dir, to a temporary directory or an ignored one."""
    ignored = {
        line.strip().strip("/")
        for line in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }

    def is_ignored(path: str) -> bool:
        return path.strip("\"'").split("/")[0] in ignored

    site_dir = re.search(r"^site_dir:\s*(\S+)", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    assert site_dir is None or is_ignored(site_dir.group(1))
    assert "site" in ignored  # mkdocs' default, for a build run by hand with another configuration
    scripts = [ROOT / "Makefile", *sorted((ROOT / "scripts").glob("*.sh")), *sorted((ROOT / ".ci").iterdir())]
    for script in [*scripts, *MANUAL]:
        text = script.read_text(encoding="utf-8")
        for command in re.findall(r"mkdocs build(?=\s+--|`|$)[^\n`]*", text, re.M):
            where = re.search(r"--site-dir[ =](\S+)", command)
            if where is None:
                assert script in MANUAL, f"{script.relative_to(ROOT)}: `{command}` without --site-dir"
                continue
            target = where.group(1).strip("\"'")
            temporary = target.startswith("$") and re.search(
                rf"^\s*{re.escape(target.strip('${}'))}=\$\(mktemp -d", text, re.M
            )
            assert temporary or is_ignored(target), (
                f"{script.relative_to(ROOT)}: `{command}` writes into the checkout"
            )
