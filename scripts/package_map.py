#!/usr/bin/env python3
"""docs/architecture.md's package map and layer diagram, generated so that they cannot drift.

The map (the fenced block under "## Package map") lists every package and root module of ``kcl_daemon/``
and ``kcl_daemon/core/`` in the order of the import-linter layers of pyproject.toml, with its lines of
Python counted from the tree and its description from scripts/package_map.toml (hand-written, one per
entry). The layer diagram (the fenced block under "## Layers") is drawn from the same contracts.

    python scripts/package_map.py --check   exit 1 naming what drifted (scripts/lint.sh runs it)
    python scripts/package_map.py --write   rewrite both blocks in docs/architecture.md

Standard library only, so it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import textwrap
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
DESCRIPTIONS = ROOT / "scripts" / "package_map.toml"
PYPROJECT = ROOT / "pyproject.toml"
WIDTH = 108  #: the longest line the map may have
MAP_HEADING = "## Package map"
LAYERS_HEADING = "## Layers"
#: The folders whose children the map lists, each with its import-linter container ('' for the root).
FOLDERS = {"kcl_daemon/": "", "kcl_daemon/core/": "kcl_daemon.core"}


@dataclass(frozen=True)
class Entry:
    path: str  #: relative to the checkout: ``kcl_daemon/leases/``, ``kcl_daemon/cli.py``
    depth: int  #: indentation level in the map
    lines: int | None  #: lines of Python, None for what is not Python
    text: str

    @property
    def name(self) -> str:
        """The entry as the map shows it, under its folder: ``leases/``, ``cli.py``."""
        folder = self.path.rstrip("/").rpartition("/")[0]
        return self.path[len(folder) + 1 :] if self.depth else self.path


def python_lines(path: Path) -> int:
    files = [path] if path.is_file() else [p for p in path.rglob("*.py") if "__pycache__" not in p.parts]
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in files)


def children(folder: str) -> list[str]:
    """The packages (``name/``) and modules (``name.py``) of a folder, as the map names them."""
    found = []
    for child in sorted((ROOT / folder).iterdir()):
        if child.name.startswith((".", "__pycache__")) or child.name == "__init__.py":
            continue
        if child.is_dir() and any(child.rglob("*.py")):
            found.append(child.name + "/")
        elif child.suffix == ".py":
            found.append(child.name)
    return found


def contracts() -> list[dict[str, object]]:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    found: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return found


def layer_names(layer: str) -> list[str]:
    return [name.strip() for name in re.split(r"[|:]", layer) if name.strip()]


def layers_of(container: str) -> list[str]:
    """The layers (top first) of the layers contract over ``container`` ('' for the whole package)."""
    for contract in contracts():
        if contract.get("type") != "layers":
            continue
        if (contract.get("containers") or [""]) == [container]:
            layers: list[str] = contract["layers"]  # type: ignore[assignment]
            if container:
                return layers
            return [re.sub(r"\bkcl_daemon\.", "", layer) for layer in layers]
    return []


def layer_order(container: str) -> dict[str, int]:
    """Each name's place in the contract's order: layer by layer, top first, as written."""
    names = [name for layer in layers_of(container) for name in layer_names(layer)]
    return {name: index for index, name in enumerate(names)}


def wrap(text: str, indent: int) -> list[str]:
    return textwrap.wrap(text, WIDTH - indent, break_on_hyphens=False) or [""]


def problems_and_entries() -> tuple[list[str], list[Entry]]:
    described = tomllib.loads(DESCRIPTIONS.read_text(encoding="utf-8"))
    problems: list[str] = []
    entries: list[Entry] = []

    def walk(folder: str, depth: int) -> None:
        texts: dict[str, str] = described.get(folder, {})
        found = children(folder)
        order = layer_order(FOLDERS[folder])
        for name in sorted(set(texts) - set(found)):
            problems.append(
                f"{folder}{name}: described in scripts/package_map.toml, not in the tree (remove its entry)"
            )
        for name in found:
            if name not in texts:
                problems.append(
                    f"{folder}{name}: in the tree, without a description in scripts/package_map.toml "
                    f'["{folder}"] (add one)'
                )
            module = name.removesuffix("/").removesuffix(".py")
            if module not in order:
                contract = (
                    f"the layers contract over {FOLDERS[folder]}"
                    if FOLDERS[folder]
                    else "the `layers` contract"
                )
                problems.append(f"{folder}{name}: in no layer of {contract} (pyproject.toml)")
        for name in sorted(
            found, key=lambda n: (order.get(n.removesuffix("/").removesuffix(".py"), 10**6), n)
        ):
            path = folder + name
            entries.append(Entry(path, depth, python_lines(ROOT / path), texts.get(name, "")))
            if path in FOLDERS:
                walk(path, depth + 1)

    entries.append(Entry("kcl_daemon/", 0, None, ""))
    walk("kcl_daemon/", 1)
    for path, text in described.get("outside", {}).items():
        target = ROOT / path
        if not target.exists():
            problems.append(f"{path}: described in scripts/package_map.toml [outside], not in the tree")
            continue
        is_python = (target / "__init__.py").exists() or target.suffix == ".py"
        entries.append(Entry(path, 0, python_lines(target) if is_python else None, text))
    return problems, entries


def render_map(entries: list[Entry]) -> str:
    """The map: name, lines of Python, description (wrapped under itself)."""
    name_width = max(2 * e.depth + len(e.name) for e in entries if e.text) + 1
    column = name_width + 8
    out = []
    for entry in entries:
        head = " " * (2 * entry.depth) + entry.name
        if not entry.text:
            out.append(head)
            continue
        figure = f"{entry.lines:>5}" if entry.lines is not None else " " * 5
        first, *rest = wrap(entry.text, column)
        out.append(f"{head:<{name_width}} {figure}  {first}")
        out.extend(" " * column + line for line in rest)
    return "\n".join(out)


def render_layers() -> str:
    """The layers contract top first; a package with a layers contract of its own gets it indented below."""

    def draw(container: str, depth: int) -> list[str]:
        lines = []
        for layer in layers_of(container):
            lines.append("  " * depth + re.sub(r"\s*([|:])\s*", r" \1 ", layer.strip()))
            names = layer_names(layer)
            if len(names) == 1:
                inner = f"{container}.{names[0]}" if container else f"kcl_daemon.{names[0]}"
                lines.extend(draw(inner, depth + 1))
        return lines

    return "\n".join(draw("", 0))


def block_span(page: str, heading: str) -> tuple[int, int]:
    """Where the first fenced block after ``heading`` starts and ends (its inside, without the fences)."""
    at = page.index(f"\n{heading}\n")
    start = page.index("\n```\n", at) + len("\n```\n")
    end = page.index("\n```\n", start)
    return start, end


def close_enough(shown: int, counted: int) -> bool:
    """A figure passes while it is within a tenth (at least 10 lines) of the count: small edits need no
    regeneration, a package that grew or shrank does."""
    return abs(shown - counted) <= max(10, counted // 10)


def shown_figures(old_block: str, entries: list[Entry]) -> dict[str, int | None]:
    """The figure the map shows for each entry it has (None: shown without one)."""
    shown: dict[str, int | None] = {}
    for entry in entries:
        indent = " " * (2 * entry.depth)
        match = re.search(rf"^{indent}{re.escape(entry.name)}(?: +(\d+))?(?:\s|$)", old_block, re.M)
        if match is not None:
            shown[entry.path] = int(match.group(1)) if match.group(1) else None
    return shown


def tolerated(old_block: str, entries: list[Entry]) -> tuple[list[Entry], list[str]]:
    """The entries with the figures the map shows where those are close enough, and what drifted."""
    shown = shown_figures(old_block, entries)
    kept, notes = [], []
    for entry in entries:
        figure = shown.get(entry.path)
        if entry.path not in shown:
            notes.append(f"{entry.path}: not in the map")
        elif entry.lines is not None and figure is not None and close_enough(figure, entry.lines):
            entry = replace(entry, lines=figure)
        elif entry.lines is not None:
            was = f"{figure} lines" if figure is not None else "no figure"
            notes.append(f"{entry.path}: {was} in the map, {entry.lines} lines in the tree")
        kept.append(entry)
    return kept, notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="exit 1, naming what drifted")
    action.add_argument("--write", action="store_true", help="rewrite both blocks in docs/architecture.md")
    parser.add_argument("--print", action="store_true", help="also print the generated map")
    args = parser.parse_args()

    problems, entries = problems_and_entries()
    page = PAGE.read_text(encoding="utf-8")
    generated = {MAP_HEADING: render_map(entries), LAYERS_HEADING: render_layers()}
    if args.print:
        sys.stdout.write(generated[MAP_HEADING] + "\n")
    if args.write:
        for heading, block in generated.items():
            start, end = block_span(page, heading)
            page = page[:start] + block + page[end:]
        PAGE.write_text(page, encoding="utf-8")
        for problem in problems:
            sys.stderr.write(f"package map: {problem}\n")
        return 1 if problems else 0

    for heading, block in generated.items():
        start, end = block_span(page, heading)
        expected = block
        if heading == MAP_HEADING:
            kept, notes = tolerated(page[start:end], entries)
            expected = render_map(kept)
            problems.extend(notes)
        if page[start:end] != expected:
            diff = difflib.unified_diff(
                page[start:end].splitlines(),
                block.splitlines(),
                "docs/architecture.md",
                "generated",
                lineterm="",
                n=0,
            )
            problems.append(
                f'the block under "{heading}" differs from the generated one (what --write changes):\n'
                + "\n".join(diff)
            )
    for problem in problems:
        sys.stderr.write(f"package map: {problem}\n")
    if problems:
        sys.stderr.write(
            "docs/architecture.md's package map or layers are stale: fix the above, then run "
            ".venv/bin/python scripts/package_map.py --write"
            "\n"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
