"""Relevance feedback (pure): expand a round's query with terms that set the useful pages apart.

Pages a reasoner judged useful describe the evidence in the document's own words; adding
their most distinctive terms to the query pulls in the pages that continue it (the rest of a
table, the other year, the definition) even when the reasoner proposes no refined query.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

_WORD = re.compile(r"[a-z][a-z0-9]{2,}")
_STOPWORDS = frozenset(
    """about above after again against all also among and any are because been before being
    below between both but can could did does doing down during each few for from further had
    has have having her here hers him his how into its itself just more most much must nor not
    now off once only other our ours out over own same she should some such than that the their
    theirs them then there these they this those through too under until very was were what
    when where which while who whom why will with would you your yours page pages table figure
    percent per total""".split()
)


def terms(text: str) -> list[str]:
    """Lower-cased content words of ``text`` (no stopwords, at least three characters)."""
    return [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]


def expansion_terms(
    query: str,
    useful_texts: Sequence[str],
    background_texts: Sequence[str],
    limit: int,
    max_df: float = 0.5,
) -> list[str]:
    """The ``limit`` terms of the useful pages with the highest tf * idf against the background.

    Terms already in the query, and terms on more than ``max_df`` of the background pages
    (boilerplate, running headers), are left out. Ties break alphabetically (deterministic).
    """
    if limit <= 0 or not useful_texts:
        return []
    background = [set(terms(t)) for t in background_texts] or [set()]
    df: Counter[str] = Counter()
    for words in background:
        df.update(words)
    n = len(background)
    asked = set(terms(query))
    tf: Counter[str] = Counter()
    for text in useful_texts:
        tf.update(terms(text))
    scored = [
        (count * math.log((n + 1) / (df[w] + 0.5)), w)
        for w, count in tf.items()
        if w not in asked and df[w] <= max_df * n
    ]
    scored.sort(key=lambda sw: (-sw[0], sw[1]))
    return [w for _, w in scored[:limit]]
