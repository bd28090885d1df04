"""Sub-queries for multi-part questions (pure): one search per part finds pages the whole misses.

A question asking about two years, two entities or a comparison ("revenue in 2019 and 2020",
"Which is larger, A or B?") has evidence on several pages; the fused ranking of the whole
question favours pages matching every part at once and can bury the page of one part. Searching
each part on its own brings those pages back as candidates.
"""

from __future__ import annotations

import re

_YEAR = re.compile(r"\b(?:19|20)\d{2}\b")
_YEAR_LIST = re.compile(
    r"\b(?:19|20)\d{2}(?:\s*(?:,|\band\b|\bor\b|&|\bto\b|-|\u2013)\s*(?:19|20)\d{2}\b)+"
)
_SPLIT = re.compile(
    r"\s*(?:,|;|\band\b|\bor\b|\bvs\.?|\bversus\b|\bcompared (?:to|with)\b|\bthan\b)\s*",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9%$.\-]*")
_STOP = frozenset(
    """a an the of in on at to for by with from is are was were be what which who whom how
    many much does do did has have had this that these those it its their there according
    report document as than more less most least between among""".split()
)


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.lower() not in _STOP]


def _year_variants(question: str) -> list[str]:
    years = list(dict.fromkeys(_YEAR.findall(question)))
    if len(years) < 2:
        return []
    variants = []
    for keep in years:
        text = _YEAR_LIST.sub(
            lambda m, keep=keep: keep if keep in m.group(0) else m.group(0), question
        )
        for other in years:
            if other != keep:
                text = re.sub(rf"(?:\s*(?:,|\band\b|\bor\b|&)\s*)?\b{other}\b", "", text)
        variants.append(re.sub(r"\s+([?.!,])", r"\1", re.sub(r"\s+", " ", text)).strip())
    return variants


def _part_variants(question: str, min_words: int) -> list[str]:
    parts = [p.strip(" ?.!") for p in _SPLIT.split(question) if p and p.strip(" ?.!")]
    parts = [p for p in parts if len(_content_words(p)) >= min_words]
    return parts if len(parts) >= 2 else []


def split_question(question: str, *, max_parts: int = 4, min_words: int = 2) -> list[str]:
    """The parts of a multi-part question, or [] when it has one part.

    Years first: a question naming several years gives one variant per year (the other years
    removed). Otherwise the question is split on "and", "or", commas, "vs", "compared to" and
    "than", keeping parts with at least ``min_words`` content words.
    """
    variants = _year_variants(question) or _part_variants(question, min_words)
    unique = [v for v in dict.fromkeys(variants) if v and v != question.strip()]
    return unique[:max_parts] if len(unique) >= 2 else []
