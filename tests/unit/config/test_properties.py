"""The Java .properties parser, case by case against java.util.Properties.load behaviour."""

from __future__ import annotations

import pytest

from kcl_daemon.config.properties import PropertiesSyntaxError, parse_properties


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1", {"a": "1"}),
        ("a = 1", {"a": "1"}),
        ("a:1", {"a": "1"}),
        ("a : 1", {"a": "1"}),
        ("a 1", {"a": "1"}),
        ("a\t\t1", {"a": "1"}),
        ("a = = 1", {"a": "= 1"}),  # only one separator is consumed
        ("a=1   ", {"a": "1   "}),  # trailing whitespace is kept
        ("   a=1", {"a": "1"}),
        ("a=", {"a": ""}),
        ("a", {"a": ""}),
        ("# comment\n! also comment\n\n  \na=1", {"a": "1"}),
        ("a=1\na=2", {"a": "2"}),
        ("a=one \\\n    two", {"a": "one two"}),
        ("a=one\\\\\nb=2", {"a": "one\\", "b": "2"}),  # an even number of backslashes does not continue
        ("a=x \\\n  y \\\n  z", {"a": "x y z"}),
        ("# comment \\\na=1", {"a": "1"}),  # comments never continue
        ("a\\ b=c", {"a b": "c"}),
        ("a\\=b=c", {"a=b": "c"}),
        ("a\\:b:c", {"a:b": "c"}),
        ("a=\\u0041\\u00e9", {"a": "A\u00e9"}),
        ("a=tab\\there\\nnew", {"a": "tab\there\nnew"}),
        ("a=c:\\\\path\\\\x", {"a": "c:\\path\\x"}),
        ("a=\\q", {"a": "q"}),
        ("a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),
        ("a=trailing\\", {"a": "trailing"}),
        ("executableName = python3  app.py --flag", {"executableName": "python3  app.py --flag"}),
    ],
)
def test_parse(text: str, expected: dict[str, str]) -> None:
    assert {k: e.value for k, e in parse_properties(text).items()} == expected


def test_lines_are_remembered() -> None:
    entries = parse_properties("# c\n\na=1\nb=x \\\n y\nc=3", source="app.properties")
    assert [entries[k].line for k in "abc"] == [3, 4, 6]


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(PropertiesSyntaxError, match=r"app.properties:2: malformed \\uxxxx escape"):
        parse_properties("a=1\nb=\\u12G4", source="app.properties")
