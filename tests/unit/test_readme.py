"""The README documents what the code does."""

from __future__ import annotations

from pathlib import Path

from kcl_daemon.config.keys import markdown_table

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_key_table_is_generated_from_the_key_table() -> None:
    start = README.index("<!-- keys:start -->\n") + len("<!-- keys:start -->\n")
    end = README.index("\n<!-- keys:end -->")
    assert README[start:end] == markdown_table(), (
        "regenerate: python -c 'from kcl_daemon.config.keys import *; print(markdown_table())'"
    )


def test_readme_has_exactly_two_set_up_commands() -> None:
    block = README.split("## Set-up commands", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in block.strip().splitlines()] == ["make run", "make test"]
