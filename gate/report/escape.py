"""Text from the model, the data or a results file, made safe to show: invisible characters shown
escaped, GitHub references defused, and testcase names made unique.

- :func:`visible`: a name that differs from another only by a line break, a zero-width or bidi
  character, or another invisible code point must not render the same (nor break a table line or
  send terminal escape sequences); such characters are shown as Python writes them (``\\n``,
  ``\\x1b``, ``\\u200b``), everything else as it is.
- :func:`unlinked`: GitHub turns ``#1``, ``owner/repo#2`` and ``GH-3`` in Markdown text into links to
  issues and pull requests, and the linked issue gets a "mentioned this" event: text from a fork's
  results file could ping any issue. A word joiner (U+2060) after ``#`` or ``GH-`` keeps the text as
  it reads and stops the link (GitHub docs, "Autolinked references and URLs").
- :func:`unique_names`: JUnit consumers key testcases by name; two outputs whose names render the
  same, or an output named like the "iteration N" case, must not merge into one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

WORD_JOINER = "\u2060"
_INVISIBLE = frozenset({"Cc", "Cf", "Co", "Cn", "Cs", "Zl", "Zp"})
_REFERENCE = re.compile(r"(?i)(#|\bGH-)(?=\d)")


def _shown(char: str) -> str:
    return char.encode("unicode_escape").decode("ascii") if char.isascii() else f"\\u{ord(char):04x}"


def _escape(char: str) -> str:
    if char == " ":
        return char
    category = unicodedata.category(char)
    if category in _INVISIBLE or category == "Zs":
        code = ord(char)
        if code < 0x80:
            return _shown(char)
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return char


def visible(text: object, keep: str = "") -> str:
    """``text`` with every character that renders as nothing or moves the line (control, format,
    private-use, unassigned and surrogate code points, line and paragraph separators, spaces other
    than U+0020) written as its escape: ``\\n``, ``\\t``, ``\\x1b``, ``\\u200b``, ``\\U000e0001``.
    Characters in ``keep`` stay as they are (a caller that folds whitespace itself keeps ``\\n``)."""
    text = str(text)
    if text.isascii() and text.isprintable():
        return text
    return "".join(char if char in keep else _escape(char) for char in text)


def unlinked(text: str) -> str:
    """``text`` with a word joiner after every ``#`` and ``GH-`` that precedes a digit, so GitHub
    links no issue or pull request (``#1``, ``owner/repo#2``, ``GH-3``)."""
    return _REFERENCE.sub(lambda match: match.group(1) + WORD_JOINER, text)


def unique_names(names: Iterable[str]) -> list[str]:
    """``names`` in order, each repeated one suffixed `` (2)``, `` (3)``, ... (skipping any suffix
    already taken), so every name in the list is distinct."""
    taken: set[str] = set()
    seen: dict[str, int] = {}
    unique = []
    names = list(names)
    everything = set(names)
    for name in names:
        candidate = name
        if name in taken:
            count = seen.get(name, 1)
            while candidate in taken or candidate in everything:
                count += 1
                candidate = f"{name} ({count})"
            seen[name] = count
        taken.add(candidate)
        unique.append(candidate)
    return unique
