"""The "May import:" line of each package's docstring (and of any module docstring that has one) against
the import-linter contracts of pyproject.toml and the code.

The line names packages in double backticks or ``:mod:`` roles, relative to ``kcl_daemon`` unless
written in full (``aws`` is ``kcl_daemon.aws``; in the core write ``kcl_daemon.core.leases``); "the root
utilities" are the layers under the core (``retry``, ``clock``, ...). A name after "never" or "nothing"
(up to the next ``;``, ``)`` or the sentence's end) is one it may not import. A line fails when it names
something that does not exist, allows an import a contract forbids (allowing a package allows every
module in it, and a forbidden contract also forbids what reaches the forbidden module through others),
both allows and rules out a name, or leaves out a package the code imports.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import grimp
import pytest

from tests.support.paths import REPO

SOURCES = {"kcl_daemon": REPO / "kcl_daemon", "kcl_protocol": REPO / "protocol" / "kcl_protocol"}
#: The packages whose __init__.py must say what they may import: every layer of the contracts.
LAYERED = ["kcl_daemon/*/__init__.py", "kcl_daemon/core/*/__init__.py", "protocol/kcl_protocol/__init__.py"]
TOKEN = re.compile(
    r"``(?P<name>[A-Za-z_][\w.]*)``|:mod:`~?(?P<mod>[A-Za-z_][\w.]*)`|\b(?P<no>never|nothing)\b"
    r"|(?P<end>[;)]|\.(?:\s|$))|(?P<roots>the\s+root\s+utilities)"
)


@dataclass
class MayImport:
    """One docstring's line: the module it speaks for, what it allows and what it rules out."""

    path: str
    module: str
    allowed: set[str] = field(default_factory=set)
    denied: set[str] = field(default_factory=set)
    unknown: set[str] = field(default_factory=set)


def module_name(path: str) -> str:
    top, _, rest = path.partition("/")
    if top == "protocol":
        rest = rest.partition("/")[2]
        top = "kcl_protocol"
    parts = [top, *rest.removesuffix(".py").split("/")]
    return ".".join(p for p in parts if p and p != "__init__")


@cache
def modules() -> frozenset[str]:
    """Every module and package in the tree."""
    found = set()
    for top, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            if "__pycache__" not in path.parts:
                parts = [top, *path.relative_to(folder).with_suffix("").parts]
                found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return frozenset(found)


def under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@cache
def contracts() -> tuple[dict[str, Any], ...]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return tuple(config["tool"]["importlinter"]["contracts"])


def root_utilities() -> set[str]:
    """The modules in the layers below the core's: what every package may lean on."""
    (layers,) = [c["layers"] for c in contracts() if c["id"] == "layers"]
    below = layers[layers.index("kcl_daemon.core") + 1 :]
    return {name.strip() for layer in below for name in re.split(r"[|:]", layer)}


def place(contract: dict[str, Any], module: str) -> tuple[int, str, bool] | None:
    """The layer of a layers contract holding ``module``: its index, its name, whether it is independent."""
    prefix = "".join(f"{c}." for c in contract.get("containers", []))
    for index, layer in enumerate(contract["layers"]):
        for name in re.split(r"[|:]", layer):
            if under(module, prefix + name.strip()):
                return index, name.strip(), "|" in layer
    return None


def why_forbidden(importer: str, imported: str) -> str | None:
    """The contract that forbids ``importer`` to import ``imported``, and how; None if none does."""
    for contract in contracts():
        cid = contract["id"]
        if contract["type"] == "forbidden":
            sources = contract["source_modules"]
            if not any(under(importer, s) for s in sources):
                continue
            for forbidden in contract["forbidden_modules"]:
                if under(imported, forbidden):
                    return f"{cid} forbids it"
                if not contract.get("allow_indirect_imports") and reaches(imported, forbidden):
                    return f"{cid} forbids {forbidden}, which {imported} imports (maybe through others)"
            continue
        prefix = "".join(f"{c}." for c in contract.get("containers", []))
        mine, theirs = place(contract, importer), place(contract, imported)
        if mine is None or theirs is None or mine[1] == theirs[1]:
            continue
        if mine[0] > theirs[0]:
            return f"{cid}: {prefix}{theirs[1]} is in a layer above {prefix}{mine[1]}"
        if mine[0] == theirs[0] and mine[2]:
            return f"{cid}: {prefix}{theirs[1]} and {prefix}{mine[1]} are independent (one layer, `|`)"
    return None


@cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*SOURCES, include_external_packages=True, cache_dir=None)


def reaches(module: str, target: str) -> bool:
    """Whether ``module`` imports ``target`` (a module or an external package), directly or through others."""
    if module not in graph().modules or target not in graph().modules:
        return False
    return bool(graph().chain_exists(importer=module, imported=target, as_packages=True))


def resolve(name: str) -> str:
    return name if name.split(".")[0] in SOURCES else f"kcl_daemon.{name}"


def read(path: str) -> MayImport | None:
    """The "May import:" line of a module's docstring, if it has one."""
    return parse(path, ast.get_docstring(ast.parse((REPO / path).read_text(encoding="utf-8"))) or "")


def parse(path: str, docstring: str) -> MayImport | None:
    at = docstring.find("May import")
    if at < 0:
        return None
    paragraph = re.split(r"\n\s*\n", docstring[at:], maxsplit=1)[0]
    line = MayImport(path, module_name(path))
    negated = False
    for match in TOKEN.finditer(paragraph):
        if match["no"]:
            negated = True
        elif match["end"]:
            negated = False
        else:
            names = sorted(root_utilities()) if match["roots"] else [match["name"] or match["mod"]]
            for name in map(resolve, names):
                if name not in modules():
                    line.unknown.add(name)
                (line.denied if negated else line.allowed).add(name)
    return line


def docstring_paths() -> Iterator[str]:
    for folder in SOURCES.values():
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" not in path.parts and "May import" in path.read_text(encoding="utf-8"):
                yield str(path.relative_to(REPO))


LINES = [line for line in map(read, docstring_paths()) if line is not None]


def test_every_layered_package_says_what_it_may_import() -> None:
    packages = sorted(str(p.relative_to(REPO)) for pattern in LAYERED for p in REPO.glob(pattern))
    have = {line.path for line in LINES}
    missing = [p for p in packages if p not in have]
    assert not missing, "add a 'May import:' line to the docstrings of " + ", ".join(missing)
    assert len(LINES) >= len(packages)


@pytest.mark.parametrize("line", LINES, ids=lambda line: line.path)
def test_may_import_names_what_exists_and_allows_what_the_contracts_allow(line: MayImport) -> None:
    problems = [f"{name}: no such module or package" for name in sorted(line.unknown)]
    for name in sorted(line.allowed - line.unknown):
        for target in sorted(m for m in modules() if under(m, name)):
            if reason := why_forbidden(line.module, target):
                problems.append(f"allows {name}, but {reason}")
                break
    problems += [f"both allows and rules out {name}" for name in sorted(line.allowed & line.denied)]
    assert not problems, f"{line.path}'s 'May import:' line: " + "; ".join(problems)


@pytest.mark.parametrize("line", LINES, ids=lambda line: line.path)
def test_the_code_imports_only_what_may_import_allows(line: MayImport) -> None:
    """Every import out of the package (or module) is of something its line allows."""
    inner = [
        other.module for other in LINES if other.module != line.module and under(other.module, line.module)
    ]
    mine = [m for m in modules() if under(m, line.module) and not any(under(m, i) for i in inner)]
    outside = {
        imported
        for importer in mine
        for imported in graph().find_modules_directly_imported_by(importer)
        if imported.split(".")[0] in SOURCES and not under(imported, line.module)
    }
    not_allowed = sorted(m for m in outside if not any(under(m, name) for name in line.allowed))
    assert not not_allowed, (
        f"{line.path}: the code imports what its 'May import:' line leaves out: " + ", ".join(not_allowed)
    )


def test_the_reading_of_a_line() -> None:
    """Names, "the root utilities" and "never" as the module docstring above describes them."""
    docstring = (
        "Doc.\n\nMay import: ``aws``, :mod:`kcl_daemon.core.leases` and the root utilities (never\n"
        "``leader`` or ``worker``); ``nowhere``.\n\nNot part of it: ``sim``.\n"
    )
    line = parse("kcl_daemon/x/__init__.py", docstring)
    assert line is not None and line.module == "kcl_daemon.x"
    assert line.denied == {"kcl_daemon.leader", "kcl_daemon.worker"}
    assert line.allowed == {"kcl_daemon.aws", "kcl_daemon.core.leases", "kcl_daemon.nowhere"} | {
        f"kcl_daemon.{name}" for name in ("retry", "log_context", "clock", "blocking", "errors")
    }
    assert line.unknown == {"kcl_daemon.nowhere"}


def test_what_the_contracts_forbid() -> None:
    assert why_forbidden("kcl_daemon.leases", "kcl_daemon.worker.scheduler")  # upward
    assert why_forbidden("kcl_daemon.leases", "kcl_daemon.shards")  # sideways, one layer
    assert why_forbidden("kcl_daemon.core.leader", "kcl_daemon.core.shards.graph")  # inside a container
    assert why_forbidden("kcl_daemon.doctor.checks", "kcl_daemon.aws")  # a forbidden contract
    assert why_forbidden("kcl_daemon.core.leases", "kcl_daemon.clock")  # it imports time
    assert why_forbidden("kcl_daemon.worker", "kcl_daemon.leases") is None
    assert why_forbidden("kcl_daemon.core.leases.taker", "kcl_daemon.core.leases.reconcile") is None
