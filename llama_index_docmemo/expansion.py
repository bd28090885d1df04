"""Relevance feedback (pure): expand a round's query with terms that set the useful pages apart.

Pages a reader judged useful describe the evidence in the document's own words; adding
their most distinctive terms to the query pulls in the pages that continue it (the rest of a
table, the other year, the definition) even when the reader proposes no refined query.
Words are compared by their stemmed keys (:mod:`llama_index_docmemo.text`), as the lexical search does.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from llama_index_docmemo.text import content_words, keys


def terms(text: str) -> list[str]:
    """Lower-cased content words of ``text`` (no stop words, no numbers, no single letters)."""
    return [surface for _, surface in content_words(text)]


def expansion_terms(
    query: str,
    useful_texts: Sequence[str],
    background_texts: Sequence[str],
    limit: int,
    max_df: float = 0.5,
) -> list[str]:
    """The ``limit`` terms of the useful pages with the highest tf * idf against the background.

    Terms already in the query (same stem), and terms on more than ``max_df`` of the background
    pages (boilerplate, running headers), are left out. Each term is written as its most frequent
    form on the useful pages. Ties break alphabetically (deterministic).
    """
    if limit <= 0 or not useful_texts:
        return []
    background = [{key for key, _ in content_words(t)} for t in background_texts] or [set()]
    df: Counter[str] = Counter()
    for words in background:
        df.update(words)
    n = len(background)
    asked = set(keys(query))
    tf: Counter[str] = Counter()
    forms: dict[str, Counter[str]] = {}
    for text in useful_texts:
        for key, surface in content_words(text):
            tf[key] += 1
            forms.setdefault(key, Counter())[surface] += 1
    scored = []
    for key, count in tf.items():
        if key in asked or df[key] > max_df * n:
            continue
        form = min(forms[key].items(), key=lambda fc: (-fc[1], fc[0]))[0]
        scored.append((count * math.log((n + 1) / (df[key] + 0.5)), form))
    scored.sort(key=lambda sw: (-sw[0], sw[1]))
    return [w for _, w in scored[:limit]]
