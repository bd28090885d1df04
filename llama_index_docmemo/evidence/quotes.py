"""Quotes and names of an answer, and where a page's text says them: pure text rules.

A reader's quote or a name of the answer is *found* on a page when the page's text holds the same
words in the same order, after normalisation: case, runs of white space (line breaks of the text
layer or the OCR), typographic quotes and dashes, and a word hyphenated across a line break
("reve-\\nnue") do not count. A quote cut with an ellipsis ("...", "…") is found when its pieces
are, in order. Anything else (a paraphrase, a changed word) is not found: the check is literal on
purpose, since code, not the model, decides what a page says.

A *name* is a run of two or more capitalised words ("Acme Holdings", "Bank of America"), a
leading "The"/"A"/"An" left out, months and weekdays excluded (dates are figures); an answer that
is nothing but one capitalised word ("Canada") is a name too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TRANSLATE = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u00a0": " ",
        "\u00ad": "",  # soft hyphen
    }
)
_HYPHEN_BREAK = re.compile(r"(?<=[a-z])-\s*\n\s*(?=[a-z])")
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|…)\s*")
_CALENDAR = frozenset(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)
_CONNECTORS = frozenset({"of", "&", "de", "du", "la", "for"})
_ARTICLES = frozenset({"the", "a", "an"})
_WORD = re.compile(r"[A-Za-z][\w&'.-]*")


@dataclass(frozen=True)
class NormalText:
    """A text lower-cased with white space, quotes and dashes normalised, and for each of its
    characters the offset of the original character it came from."""

    text: str
    origin: tuple[int, ...]

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that ``text[start:end]`` stands for."""
        return self.origin[start], self.origin[end - 1] + 1


def normalise(text: str) -> NormalText:
    """``text`` as the quote rules compare it (see the module docstring)."""
    chars: list[str] = []
    origin: list[int] = []
    pending_space = False
    at = 0
    while at < len(text):
        joint = _HYPHEN_BREAK.match(text, at)
        if joint is not None and joint.end() > at:  # "reve-\nnue" reads "revenue"
            at = joint.end()
            continue
        for char in text[at].translate(_TRANSLATE).lower():
            if char.isspace():
                pending_space = bool(chars)
                continue
            if pending_space:
                chars.append(" ")
                origin.append(at)
                pending_space = False
            chars.append(char)
            origin.append(at)
        at += 1
    return NormalText("".join(chars), tuple(origin))


def quote_span(
    quote: str, page_text: str, normal: NormalText | None = None
) -> tuple[int, int] | None:
    """Where ``page_text`` says ``quote`` (offsets in ``page_text``, from the first piece's start to
    the last piece's end), or None; a quote of fewer than two characters is never found.
    ``normal``: ``normalise(page_text)`` when the caller keeps it (one page, many quotes)."""
    pieces = [normalise(p).text for p in _ELLIPSIS.split(quote)]
    pieces = [p for p in pieces if p]
    if not pieces or sum(map(len, pieces)) < 2:
        return None
    page = normal or normalise(page_text)
    ends: list[tuple[int, int]] = []
    at = 0
    for piece in pieces:
        found = page.text.find(piece, at)
        if found < 0:
            return None
        at = found + len(piece)
        ends.append((found, at))
    return page.original_span(ends[0][0], ends[-1][1])


def _capitalised(word: str) -> bool:
    return word[0].isupper() and word.lower().strip(".") not in _CALENDAR


def find_names(text: str) -> list[tuple[str, tuple[int, int]]]:
    """The names of ``text`` with their spans, in order (see the module docstring)."""
    words = list(_WORD.finditer(text))
    names: list[tuple[str, tuple[int, int]]] = []
    run: list[re.Match[str]] = []

    def close() -> None:
        while run and run[-1].group(0).lower() in _CONNECTORS:
            run.pop()
        while run and run[0].group(0).lower() in _ARTICLES:
            run.pop(0)
        if len(run) >= 2:
            start = run[0].start()
            name = text[start : run[-1].end()].rstrip(".")
            names.append((name, (start, start + len(name))))
        run.clear()

    for i, match in enumerate(words):
        word = match.group(0)
        gap = text[words[i - 1].end() : match.start()] if i else ""
        if run and gap.strip():  # punctuation between words ends a name
            close()
        if _capitalised(word) or (run and word.lower() in _CONNECTORS):
            run.append(match)
        else:
            close()
    close()
    alone = text.strip().rstrip(".")
    if not names and _WORD.fullmatch(alone) and _capitalised(alone):
        start = text.index(alone)
        names.append((alone, (start, start + len(alone))))
    return names
