"""The house's one rule for where a concern lives (docs/architecture.md): a concern's pure rules sit in
``kcl_daemon/core/<name>`` and its runtime in ``kcl_daemon/<name>``, under exactly the same name. Only the
vocabulary every concern shares (sequence numbers, stream identities) sits at the core's root without a
twin; the import-linter contract ``core-packages`` (exhaustive) keeps every core module in a layer."""

from __future__ import annotations

import tomllib

from tests.support.paths import REPO

PACKAGE = REPO / "kcl_daemon"
VOCABULARY = {"sequence", "stream_identity"}


def names(folder: object) -> set[str]:
    return {
        p.stem
        for p in PACKAGE.joinpath(*str(folder).split("/")).iterdir()
        if p.name != "__init__.py"
        and not p.name.startswith(("_", "."))
        and (p.suffix == ".py" or p.is_dir())
        and p.name != "__pycache__"
    }


def test_every_core_concern_has_its_runtime_twin_under_the_same_name() -> None:
    runtime = names(".")
    missing = sorted(name for name in names("core") - VOCABULARY if name not in runtime)
    assert missing == [], f"core concerns without a runtime twin in kcl_daemon/: {missing}"


def test_the_core_layers_name_every_core_concern_and_nothing_else() -> None:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (core,) = [c for c in contracts if c["id"] == "core-packages"]
    layered = {name.strip() for layer in core["layers"] for name in layer.replace(":", "|").split("|")}
    assert layered == names("core") and core.get("exhaustive") is True
