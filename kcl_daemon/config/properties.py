"""A parser for Java ``.properties`` files, following ``java.util.Properties.load`` exactly.

* Natural lines end at ``\\n``, ``\\r`` or ``\\r\\n``. A line ending in an odd number of backslashes
  continues on the next line, whose leading whitespace is dropped.
* Blank lines and comment lines (first non-blank character ``#`` or ``!``) are skipped; a comment line
  never continues.
* The key runs to the first unescaped ``=``, ``:`` or whitespace; then whitespace, at most one ``=`` or
  ``:``, and more whitespace are skipped; the rest is the value. Leading whitespace of the value is
  dropped, trailing whitespace is kept.
* Escapes in keys and values: ``\\t \\n \\r \\f``, ``\\uXXXX``, and ``\\x`` -> ``x`` for anything else.
  A malformed ``\\uXXXX`` is an error naming the line (Java throws too); every malformed escape in the
  file is reported, not only the first.
* A repeated key: the last value wins, and the entry remembers every line it was set on.
* A UTF-8 byte order mark at the start is dropped (Java would make it part of the first key).
"""

from __future__ import annotations

from dataclasses import dataclass

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesSyntaxError(ValueError):
    """The first syntax error; ``problems`` lists every one in the file (each naming its line)."""

    def __init__(
        self, line: int, message: str, source: str = "<properties>", problems: tuple[str, ...] = ()
    ) -> None:
        self.line = line
        self.source = source
        super().__init__(f"{source}:{line}: {message}")
        self.problems = problems or (str(self),)


@dataclass(frozen=True, slots=True)
class PropertyEntry:
    key: str
    value: str
    line: int  # 1-based line where the (last) logical line defining this key starts
    earlier_lines: tuple[int, ...] = ()  # the lines an earlier value for the same key was set on


def _logical_lines(text: str) -> list[tuple[int, str]]:
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    result: list[tuple[int, str]] = []
    index = 0
    while index < len(natural):
        start = index
        line = natural[index].lstrip(_WHITESPACE)
        index += 1
        if not line or line[0] in "#!":
            continue
        while _ends_with_odd_backslashes(line) and index < len(natural):
            line = line[:-1] + natural[index].lstrip(_WHITESPACE)
            index += 1
        if _ends_with_odd_backslashes(line):  # continuation at end of file: Java drops the backslash
            line = line[:-1]
        result.append((start + 1, line))
    return result


def _ends_with_odd_backslashes(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _unescape(raw: str, line_no: int, source: str, errors: list[PropertiesSyntaxError]) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\" or i + 1 >= len(raw):
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                errors.append(
                    PropertiesSyntaxError(line_no, f"malformed \\uxxxx escape: \\u{digits}", source)
                )
                i += 2
                continue
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WHITESPACE:
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def parse_properties(text: str, source: str = "<properties>") -> dict[str, PropertyEntry]:
    """Parse ``text``; keys map to their last entry, in first-seen order."""
    entries: dict[str, PropertyEntry] = {}
    errors: list[PropertiesSyntaxError] = []
    for line_no, line in _logical_lines(text.removeprefix("\ufeff")):
        raw_key, raw_value = _split_key_value(line)
        key = _unescape(raw_key, line_no, source, errors)
        earlier = entries.get(key)
        before = (*earlier.earlier_lines, earlier.line) if earlier is not None else ()
        entries[key] = PropertyEntry(key, _unescape(raw_value, line_no, source, errors), line_no, before)
    if errors:
        first = errors[0]
        message = str(first).removeprefix(f"{source}:{first.line}: ")
        raise PropertiesSyntaxError(first.line, message, source, tuple(str(e) for e in errors))
    return entries
