"""The one place for tokenising, stemming and stop words (pure, no I/O).

Words are normalised by Qdrant's own BM25 analyser (``qdrant_edge.Bm25``: lower-casing, its
English stop-word list, the Snowball stemmer, term hashing), the machinery that also writes the
stored "lexical" vectors (``encoders/base.py``). So the offline reader, query expansion and crop
ranking match words exactly as the lexical search does, with one stop-word list and one stemmer:
"employees" and "employee" share a key, "the" has none. A word's key is its BM25 term id.

Numbers are kept whole (``1,184`` -> ``1184``, ``12.5%`` -> ``12.5``) because the readers compare
values; letters and digits written together are split (``FY2015`` -> ``FY``, ``2015``); single
letters carry no topic and get no key.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from qdrant_edge import Bm25, Bm25Config

LANGUAGE = "english"
# A number with thousands separators and decimals, or a word of letters (with & or ' inside).
# Letters and digits written together are two tokens, so "FY2015" matches a page's "2015".
TOKEN = re.compile(r"\d[\d,]*(?:\.\d+)?%?|[^\W\d_]+(?:['&’][^\W\d_]+)*")
_ANALYSER = Bm25(Bm25Config(language=LANGUAGE))


@dataclass(frozen=True)
class Token:
    """One token of a text: where it starts, how it is written, and its match key (None: stop word)."""

    start: int
    surface: str
    key: str | None

    @property
    def is_number(self) -> bool:
        return self.surface[0].isdigit()


@lru_cache(maxsize=1 << 17)
def word_key(word: str) -> str | None:
    """The match key of one word (its stemmed BM25 term id), None for a stop word or a single letter.

    >>> word_key("Employees") == word_key("employee")
    True
    >>> word_key("the") is None
    True
    """
    if len(word) < 2 or not word[0].isalpha():
        return None
    indices = _ANALYSER.embed_query(word).indices
    if not indices:
        return None
    return "t" + "-".join(f"{int(i):x}" for i in sorted(indices))


def number_key(number: str) -> str:
    """The value of a written number as a key: separators and a trailing % removed."""
    return number.replace(",", "").rstrip("%")


@lru_cache(maxsize=1 << 17)
def key_of(token: str) -> str | None:
    """The match key of a token (a number or a word)."""
    return number_key(token) if token[:1].isdigit() else word_key(token)


def tokens(text: str) -> Iterator[Token]:
    """Every token of ``text`` in order, stop words included (with ``key=None``)."""
    for m in TOKEN.finditer(text):
        surface = m.group()
        yield Token(m.start(), surface, key_of(surface))


def keys(text: str) -> list[str]:
    """The match keys of ``text``'s content tokens, in order (stop words dropped)."""
    return [k for k in map(key_of, TOKEN.findall(text)) if k is not None]


def content_words(text: str) -> list[tuple[str, str]]:
    """(key, lower-cased surface) of each content word of ``text``, numbers left out."""
    return [
        (t.key, t.surface.lower()) for t in tokens(text) if t.key is not None and not t.is_number
    ]
